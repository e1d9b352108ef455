# Applies STEPPROF_SANITIZE ("address,undefined" or "thread") to every target.
if(STEPPROF_SANITIZE)
  set(_san "-fsanitize=${STEPPROF_SANITIZE}")
  add_compile_options(${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(${_san})
endif()
