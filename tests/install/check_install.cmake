# Installs the akt build tree into a scratch prefix, then configures, builds and runs a small
# consumer project that finds it with find_package(akt). CONSUMER (default: tests/install/
# consumer) names the consumer's source folder and EXPECT (default: "pong 42") what its output
# must match: the etcd component's check (src/etcd/CMakeLists.txt) gives its own.
if(NOT CONSUMER)
  set(CONSUMER ${AKT_SOURCE_DIR}/tests/install/consumer)
endif()
if(NOT EXPECT)
  set(EXPECT "pong 42")
endif()
set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${AKT_BINARY_DIR} --prefix ${prefix}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
set(san_flags "")
if(SANITIZE STREQUAL "address")
  set(san_flags "-fsanitize=address,undefined")
elseif(SANITIZE STREQUAL "thread")
  set(san_flags "-fsanitize=thread")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER}
  -B ${consumer_build} -G ${CMAKE_GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
  "-DCMAKE_CXX_FLAGS=${san_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${san_flags}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${consumer_build} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${consumer_build}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the consumer did not run correctly (rc ${rc})")
endif()
