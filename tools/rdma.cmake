# RDMA tools over the verbs API: uwarp-cat (stdin/stdout over RDMAP Sends) and
# uwarp-rping (rdma-core rping's ping-pong, for interop with real iWARP peers).
# Included from tools/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is tools/.
add_library(uw_rdmacli STATIC ${CMAKE_CURRENT_SOURCE_DIR}/rdmacli.c ${CMAKE_CURRENT_SOURCE_DIR}/cliutil.c)
target_link_libraries(uw_rdmacli PUBLIC uwarp)

add_executable(uwarp-cat ${CMAKE_CURRENT_SOURCE_DIR}/cat/cat_main.c
                         ${CMAKE_CURRENT_SOURCE_DIR}/cat/cat_opts.c)
target_link_libraries(uwarp-cat PRIVATE uw_rdmacli)

add_executable(uwarp-rping ${CMAKE_CURRENT_SOURCE_DIR}/rping/rping_run.c
                           ${CMAKE_CURRENT_SOURCE_DIR}/rping/rping_opts.c)
target_link_libraries(uwarp-rping PRIVATE uw_rdmacli)

install(TARGETS uwarp-cat uwarp-rping RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
