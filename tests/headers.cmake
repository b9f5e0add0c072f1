# STYLE.md §3: every header compiles on its own and has an include guard. One generated .c per
# header includes it twice and nothing else; the object library is part of the default build,
# so a header that needs another include first breaks the build.
file(GLOB rl_public_headers CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/core/*.h ${CMAKE_SOURCE_DIR}/model/*.h ${CMAKE_SOURCE_DIR}/trainer/*.h
     ${CMAKE_SOURCE_DIR}/rollout/*.h ${CMAKE_SOURCE_DIR}/rewards/*.h ${CMAKE_SOURCE_DIR}/mesh/*.h
     ${CMAKE_SOURCE_DIR}/roles/*.h ${CMAKE_SOURCE_DIR}/cli/*.h ${CMAKE_SOURCE_DIR}/include/rlctl/*.h
     ${CMAKE_SOURCE_DIR}/text/*.h ${CMAKE_SOURCE_DIR}/transport/*.h ${CMAKE_SOURCE_DIR}/run/*.h
     ${CMAKE_SOURCE_DIR}/algorithms/*.h ${CMAKE_SOURCE_DIR}/serving/*.h)
set(rl_header_srcs "")
foreach(h ${rl_public_headers})
  get_filename_component(stem ${h} NAME_WE)
  set(c ${CMAKE_BINARY_DIR}/header_check/${stem}.c)
  file(WRITE ${c}.in "#include \"${h}\"\n#include \"${h}\"\nint rl_header_check_${stem}(void);\nint rl_header_check_${stem}(void) { return 0; }\n")
  configure_file(${c}.in ${c} COPYONLY)
  list(APPEND rl_header_srcs ${c})
endforeach()
add_library(rl_header_check OBJECT ${rl_header_srcs})
target_include_directories(rl_header_check PRIVATE ${CMAKE_BINARY_DIR}/generated
  ${CMAKE_SOURCE_DIR}/core ${CMAKE_SOURCE_DIR}/model ${CMAKE_SOURCE_DIR}/trainer
  ${CMAKE_SOURCE_DIR}/rollout ${CMAKE_SOURCE_DIR}/rewards ${CMAKE_SOURCE_DIR}/roles
  ${CMAKE_SOURCE_DIR}/cli ${CMAKE_SOURCE_DIR}/mesh ${CMAKE_SOURCE_DIR}/include
  ${CMAKE_SOURCE_DIR}/text ${CMAKE_SOURCE_DIR}/transport ${CMAKE_SOURCE_DIR}/run
  ${CMAKE_SOURCE_DIR}/algorithms ${CMAKE_SOURCE_DIR}/serving ${CMAKE_SOURCE_DIR}/env)
