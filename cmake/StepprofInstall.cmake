# Installs the libraries, headers, the stepprof CLI and a CMake package so that
# find_package(stepprof) gives stepprof::recorder and stepprof::stepprof.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_stepprof_libs stepprof_log stepprof_recorder stepprof_recorder_c stepprof_read stepprof_analysis stepprof_render)
set_target_properties(stepprof_log PROPERTIES EXPORT_NAME log)
set_target_properties(stepprof_recorder PROPERTIES EXPORT_NAME recorder)
set_target_properties(stepprof_recorder_c PROPERTIES EXPORT_NAME recorder_c)
set_target_properties(stepprof_read PROPERTIES EXPORT_NAME read)
set_target_properties(stepprof_analysis PROPERTIES EXPORT_NAME analysis)
set_target_properties(stepprof_render PROPERTIES EXPORT_NAME render)

install(TARGETS ${_stepprof_libs} stepprof EXPORT stepprofTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stepprof DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET stepprof_cli)
  install(TARGETS stepprof_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(_cfg_dir ${CMAKE_INSTALL_LIBDIR}/cmake/stepprof)
install(EXPORT stepprofTargets NAMESPACE stepprof:: DESTINATION ${_cfg_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/stepprofConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/stepprofConfig.cmake INSTALL_DESTINATION ${_cfg_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stepprofConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stepprofConfig.cmake ${PROJECT_BINARY_DIR}/stepprofConfigVersion.cmake
        DESTINATION ${_cfg_dir})

# pkg-config file for the recorder (stepprof-recorder.pc), for builds without CMake.
file(RELATIVE_PATH STEPPROF_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" STEPPROF_PC_TO_PREFIX "${STEPPROF_PC_TO_PREFIX}")
if(STEPPROF_PC_TO_PREFIX STREQUAL "")
  set(STEPPROF_PC_TO_PREFIX ".")
endif()
set(STEPPROF_PC_FMT "-lfmt")
# Threads: -pthread, not CMAKE_THREAD_LIBS_INIT, which is empty where glibc (2.34+) holds
# them: a program linked on an older glibc needs libpthread (pthread_atfork).
set(STEPPROF_PC_THREADS "")
if(CMAKE_USE_PTHREADS_INIT)
  set(STEPPROF_PC_THREADS "-pthread")
endif()
set(STEPPROF_PC_DL "")
if(CMAKE_DL_LIBS)
  set(STEPPROF_PC_DL "-l${CMAKE_DL_LIBS}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/stepprof-recorder.pc.in ${PROJECT_BINARY_DIR}/stepprof-recorder.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stepprof-recorder.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
