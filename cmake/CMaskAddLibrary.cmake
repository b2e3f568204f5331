# cmask_add_library(name SOURCES... [DEPENDS tgt...] [LINK_LIBS lib...])
#
# A plain CMake library (static, position independent) that links the shared
# libMLIR/libLLVM of the distribution and is exported in the CMask install
# set, so that `find_package(CMask)` works for consumers.
function(cmask_add_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK_LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # runtime/include: the kernel ABI and descriptor layout the compiler and
  # the runtime share (header-only, installed beside the cmask headers).
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMASK_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${CMASK_BINARY_DIR}/include>
    $<BUILD_INTERFACE:${CMASK_SOURCE_DIR}/runtime/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_LINK_LIBS})
  set_property(GLOBAL APPEND PROPERTY CMASK_EXPORTED_TARGETS ${name})
endfunction()
