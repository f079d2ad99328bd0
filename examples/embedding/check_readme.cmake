# check_readme.cmake — fails unless DOC contains SOURCE verbatim, so the docs never show an
# embedding example that does not compile or does not do what it says.
file(READ ${SOURCE} source)
file(READ ${DOC} doc)
string(FIND "${doc}" "${source}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} does not contain ${SOURCE} verbatim: copy it into the ```cpp block")
endif()
