# SDP port mapper tools (draft-pinkerton-iwarp-sdp-01 section 7): the
# uwarp-pmd daemon and the uwarp-pm client. They are the I/O adapters around
# the sans-I/O core in src/pm/. _GNU_SOURCE: IP_PKTINFO / IPV6_PKTINFO, which
# the daemon needs to answer from the address a request was sent to (7.4).
add_library(uw_pm_net STATIC ${CMAKE_CURRENT_SOURCE_DIR}/pm/pm_net.c
                             ${CMAKE_CURRENT_SOURCE_DIR}/cliutil.c)
target_link_libraries(uw_pm_net PUBLIC uwarp)
target_compile_definitions(uw_pm_net PUBLIC _GNU_SOURCE)

add_executable(uwarp-pmd ${CMAKE_CURRENT_SOURCE_DIR}/pm/uwarp-pmd.c
                         ${CMAKE_CURRENT_SOURCE_DIR}/pm/pmd_config.c
                         ${CMAKE_CURRENT_SOURCE_DIR}/pm/pmd_ctl.c
                         ${CMAKE_CURRENT_SOURCE_DIR}/pm/pmd_owner.c)
target_link_libraries(uwarp-pmd PRIVATE uw_pm_net)
# The control socket's protocol is the library's internal src/pm/ctl.h.
target_include_directories(uwarp-pmd PRIVATE ${PROJECT_SOURCE_DIR}/src)

add_executable(uwarp-pm ${CMAKE_CURRENT_SOURCE_DIR}/pm/uwarp-pm.c)
target_link_libraries(uwarp-pm PRIVATE uw_pm_net)

install(TARGETS uwarp-pmd uwarp-pm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
