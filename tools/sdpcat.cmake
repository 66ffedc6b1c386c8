# uwarp-sdpcat: netcat over SDP sockets (uwarp/sdp.h). Included from
# tools/CMakeLists.txt, so CMAKE_CURRENT_SOURCE_DIR is tools/.
add_executable(uwarp-sdpcat ${CMAKE_CURRENT_SOURCE_DIR}/sdpcat/uwarp-sdpcat.c)
target_link_libraries(uwarp-sdpcat PRIVATE uw_rdmacli)
install(TARGETS uwarp-sdpcat RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
