# cmake -P script: install, build the consumer against the install, run it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/install)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${CMASK_BINARY_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -G ${GENERATOR} -S ${CONSUMER_SOURCE_DIR}
    -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix} -DMLIR_DIR=${MLIR_DIR})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/cmask-consumer ${MASK})
message("${out}")
if(NOT out MATCHES "spec @hstu: K = 2")
  message(FATAL_ERROR "consumer did not report K = 2 for @hstu")
endif()
# The installed tools run too.
run(${prefix}/bin/cmask-opt ${MASK} --cmask-lower-to-intervals)
