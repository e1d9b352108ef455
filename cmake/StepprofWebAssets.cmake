# The HTML report's charts, bundled at build time into the stepprof library:
#   1. `npm ci` in <build>/web installs the exact packages of web/package-lock.json
#      (Apache ECharts, esbuild; playwright-core for the browser test), with install
#      scripts off;
#   2. web/build.mjs bundles web/src/report.js with the parts of ECharts it uses
#      (esbuild, minified) and writes it into a generated C++ source.
# stepprof_web_assets(<var>) sets <var> to that generated source, and
# STEPPROF_WEB_MODULES to the node_modules directory (the browser test uses it).

find_program(STEPPROF_NODE NAMES node nodejs)
find_program(STEPPROF_NPM NAMES npm)
if(NOT STEPPROF_NODE OR NOT STEPPROF_NPM)
  message(FATAL_ERROR "stepprof bundles the HTML report's charts at build time with Node.js and npm, "
                      "which were not found: run scripts/install-deps.sh (packages nodejs, npm)")
endif()

execute_process(COMMAND ${STEPPROF_NODE} --version OUTPUT_VARIABLE STEPPROF_NODE_VERSION
                OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE "^v" "" STEPPROF_NODE_VERSION "${STEPPROF_NODE_VERSION}")
if(STEPPROF_NODE_VERSION VERSION_LESS 18)
  message(FATAL_ERROR "Node.js ${STEPPROF_NODE_VERSION} is too old to bundle the HTML report's charts "
                      "(esbuild needs 18, the browser test 20): install Node.js 20")
endif()

function(stepprof_web_assets out_var)
  set(src ${PROJECT_SOURCE_DIR}/web)
  set(dir ${PROJECT_BINARY_DIR}/web)
  file(MAKE_DIRECTORY ${dir})
  set(stamp ${dir}/npm-ci.stamp)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${src}/package.json ${src}/package-lock.json ${dir}
    COMMAND ${STEPPROF_NPM} ci --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    WORKING_DIRECTORY ${dir}
    DEPENDS ${src}/package.json ${src}/package-lock.json
    COMMENT "npm ci: the chart library and bundler pinned by web/package-lock.json"
    VERBATIM)
  file(GLOB scripts CONFIGURE_DEPENDS ${src}/src/*.js)
  set(cpp ${dir}/report_script.cpp)
  add_custom_command(
    OUTPUT ${cpp} ${dir}/report.min.js
    COMMAND ${STEPPROF_NODE} ${src}/build.mjs --modules ${dir}/node_modules --out-js ${dir}/report.min.js
            --out-cpp ${cpp}
    DEPENDS ${stamp} ${src}/build.mjs ${scripts}
    COMMENT "Bundling the HTML report's charts (web/build.mjs)"
    VERBATIM)
  set(${out_var} ${cpp} PARENT_SCOPE)
  set(STEPPROF_WEB_MODULES ${dir}/node_modules PARENT_SCOPE)
endfunction()
