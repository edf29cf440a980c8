# Writes a C++ source that defines one char array holding a text file as it is (the dashboard
# page, src/http/dashboard.html), so the library serves it with no file at run time.
#   cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DNAMESPACE=<ns> -DSYMBOL=<name> -P embed_text.cmake
# The text goes into raw string literals of at most 16 KiB each (compilers limit one literal's
# length); the delimiter must not occur in the file (checked).
file(READ ${INPUT} text)
set(delim "akt_embed")
string(FIND "${text}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )${delim}\"")
endif()
string(LENGTH "${text}" length)
set(body "")
set(chunk 16384)
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${text}" ${offset} ${chunk} piece)
  string(APPEND body "R\"${delim}(${piece})${delim}\"\n")
  math(EXPR offset "${offset} + ${chunk}")
endwhile()
file(WRITE ${OUTPUT}.tmp "// Generated from ${INPUT} by cmake/embed_text.cmake: edit that file.\n"
  "namespace ${NAMESPACE} {\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] =\n${body};\n}\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
