# Packaging test (CTest "packaging"): installs the build, then builds and runs a consumer
# with find_package(stepprof), another with add_subdirectory(stepprof), and a C-only
# program that uses only the recorder, built with CMake and with the pkg-config file.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run.cmake
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT ${v})
    message(FATAL_ERROR "run.cmake: ${v} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

# Runs the C consumer built in `dir`, which records three updates: its log must hold a
# config and 3 update records.
function(run_c_consumer what dir)
  run(${dir}/consumer ${dir}/log.jsonl)
  file(STRINGS ${dir}/log.jsonl lines)
  list(LENGTH lines n)
  if(NOT n EQUAL 4)
    message(FATAL_ERROR "${what}: expected a config and 3 update records in ${dir}/log.jsonl, found ${n} lines")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)

# The Python package, when built, is installed too: import it from the prefix alone and
# record one update with it.
if(PYTHON_EXECUTABLE AND PYTHON_INSTALL_DIR)
  set(py_dir ${PYTHON_INSTALL_DIR})
  if(NOT IS_ABSOLUTE ${py_dir})
    set(py_dir ${WORK_DIR}/prefix/${py_dir})
  endif()
  if(NOT EXISTS ${py_dir}/stepprof/__init__.py)
    message(FATAL_ERROR "python: cmake --install did not put the package stepprof in ${py_dir}")
  endif()
  run(${CMAKE_COMMAND} -E env PYTHONPATH=${py_dir} PYTHONNOUSERSITE=1 ${PYTHON_EXECUTABLE} -c
      "import stepprof, sys; assert stepprof.__file__.startswith(sys.argv[1]), stepprof.__file__; r = stepprof.Recorder(sys.argv[2], rank=0, world_size=1, device_timing='off')\nwith r.region('py_work'): pass\nr.end_update(0); r.close(); lines = open(sys.argv[2]).read().splitlines(); assert len(lines) == 2, lines"
      ${py_dir} ${WORK_DIR}/python-log.jsonl)
  message(STATUS "python: ok (${py_dir})")
endif()
foreach(kind find-package add-subdirectory)
  set(b ${WORK_DIR}/${kind})
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/${kind}-test -B ${b} -G Ninja -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DSTEPPROF_DIR=${SOURCE_DIR})
  run(${CMAKE_COMMAND} --build ${b} -j 2)
  run(${b}/consumer ${b}/log.jsonl)
  message(STATUS "${kind}: ok")
endforeach()

# A C-only, recorder-only consumer, configured as if the analyzer's dependencies (and
# nlohmann_json, used inside the libraries only) were missing: it must not need them.
set(b ${WORK_DIR}/c-recorder)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/c-recorder-test -B ${b} -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_DISABLE_FIND_PACKAGE_simdjson=TRUE
    -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=TRUE -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=TRUE
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE)
run(${CMAKE_COMMAND} --build ${b} -j 2)
run_c_consumer(c-recorder ${b})
message(STATUS "c-recorder: ok")

# A C++17 program that uses only the C API, linking stepprof::recorder_c: it stays C++17
# (stepprof::recorder made it C++20).
set(b ${WORK_DIR}/cxx17-c-api)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/cxx17-c-api-test -B ${b} -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_DISABLE_FIND_PACKAGE_simdjson=TRUE
    -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=TRUE -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=TRUE
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE)
run(${CMAKE_COMMAND} --build ${b} -j 2)
run_c_consumer(cxx17-c-api ${b})
message(STATUS "cxx17-c-api: ok")

# The same C program built without CMake, with the flags of the installed pkg-config file.
find_program(PKG_CONFIG pkg-config)
find_program(C_COMPILER NAMES cc gcc)
if(PKG_CONFIG AND C_COMPILER)
  file(GLOB_RECURSE pc_files ${WORK_DIR}/prefix/*/stepprof-recorder.pc)
  if(NOT pc_files)
    message(FATAL_ERROR "pkg-config: cmake --install did not install stepprof-recorder.pc")
  endif()
  list(GET pc_files 0 pc_file)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir} ${PKG_CONFIG} --cflags --libs
                          stepprof-recorder
                  RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs stepprof-recorder failed (${rc})")
  endif()
  # Threads are named, as the recorder needs them (pthread_atfork) on any glibc: on 2.34+
  # CMake's thread flags are empty, and the file listed none.
  if(NOT flags MATCHES "(^| )-pthread( |$)")
    message(FATAL_ERROR "pkg-config --libs stepprof-recorder names no -pthread: ${flags}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  set(b ${WORK_DIR}/pkg-config)
  file(MAKE_DIRECTORY ${b})
  run(${C_COMPILER} ${SOURCE_DIR}/tests/packaging/c-recorder-test/consumer.c -o ${b}/consumer ${flags})
  run_c_consumer(pkg-config ${b})
  message(STATUS "pkg-config: ok (${flags})")
else()
  message(STATUS "pkg-config: not tried (no pkg-config or C compiler)")
endif()
