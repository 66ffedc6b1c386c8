# uwarp-run: runs a program with libuwarp-preload.so preloaded (issue 17;
# docs/preload.md). Included from tools/CMakeLists.txt, so
# CMAKE_CURRENT_SOURCE_DIR is tools/. It compiles the rules parser in (to
# check --conf files) and links nothing else of uwarp: it must never open a
# socket or carry the library itself.
add_executable(uwarp-run ${CMAKE_CURRENT_SOURCE_DIR}/run/uwarp-run.c
                         ${CMAKE_CURRENT_SOURCE_DIR}/cliutil.c
                         ${PROJECT_SOURCE_DIR}/src/preload/conf.c)
target_include_directories(uwarp-run PRIVATE ${PROJECT_SOURCE_DIR}/src/preload)
# Where the library is: this build tree's copy for the uwarp-run of this
# build tree (the directory below), else the installed one, looked for next
# to the installed uwarp-run first (relative, so an install moved with
# `cmake --install --prefix` still finds it) and then where it was
# configured to go.
file(RELATIVE_PATH UW_RUN_BIN_TO_LIB "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
if(UW_RUN_BIN_TO_LIB STREQUAL "")
  set(UW_RUN_BIN_TO_LIB ".")
endif()
target_compile_definitions(uwarp-run PRIVATE
  UW_RUN_VERSION="${PROJECT_VERSION}"
  UW_RUN_BUILD_DIR="${CMAKE_CURRENT_BINARY_DIR}"
  UW_RUN_BUILD_ROOT="${PROJECT_BINARY_DIR}"
  UW_RUN_BUILD_LIB="${PROJECT_BINARY_DIR}/src/preload/libuwarp-preload.so"
  UW_RUN_BIN_TO_LIB="${UW_RUN_BIN_TO_LIB}"
  UW_RUN_INSTALL_LIB="${CMAKE_INSTALL_FULL_LIBDIR}/uwarp/libuwarp-preload.so")
install(TARGETS uwarp-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
