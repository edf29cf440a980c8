# Installs the akt build tree into a scratch prefix, then configures, builds and runs a consumer
# that asks for the etcd component: find_package(akt COMPONENTS etcd), akt::etcd.
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
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${AKT_SOURCE_DIR}/tests/etcd/install/consumer
  -B ${consumer_build} -G ${CMAKE_GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
  "-DCMAKE_CXX_FLAGS=${san_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${san_flags}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the etcd consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${consumer_build} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the etcd consumer failed: ${rc}")
endif()
execute_process(COMMAND ${consumer_build}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "invalid_cluster_config")
  message(FATAL_ERROR "the etcd consumer did not run correctly (rc ${rc})")
endif()
