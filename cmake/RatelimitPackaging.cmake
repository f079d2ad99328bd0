# RatelimitPackaging.cmake — Debian packages through CPack (`cpack -G DEB` in the build tree,
# or scripts/package). One package per install component:
#   ratelimitd        bin/ratelimitd, the systemd unit, /etc/ratelimit/ratelimit.yaml (conffile)
#   ratelimit-tools   bin/ratelimit-sim, bin/ratelimit-bench
#   libratelimit-dev  headers, static libraries, CMake package, pkg-config files, test vectors
# Binary dependencies come from dpkg-shlibdeps; the -dev package names what its consumers compile
# against. Invariant: the packaged prefix is /usr, whatever CMAKE_INSTALL_PREFIX says.
include_guard(GLOBAL)

# The service's files that are not a target: the unit, the default configuration, the docs.
# Only in the packages (EXCLUDE_FROM_ALL: a plain `cmake --install` never writes /etc or /lib).
if(TARGET ratelimitd)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/ratelimitd.service
          DESTINATION /lib/systemd/system COMPONENT server EXCLUDE_FROM_ALL)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/ratelimit.yaml
          DESTINATION /etc/ratelimit COMPONENT server EXCLUDE_FROM_ALL)
  file(GLOB ratelimit_doc_pages ${PROJECT_SOURCE_DIR}/docs/*.md)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
                ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${ratelimit_doc_pages}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/ratelimitd COMPONENT server EXCLUDE_FROM_ALL)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ratelimit)
set(CPACK_PACKAGE_VENDOR "ratelimit authors")
set(CPACK_PACKAGE_CONTACT "ratelimit authors <ratelimit@example.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server tools dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${PROJECT_HOMEPAGE_URL})

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME ratelimitd)
set(CPACK_COMPONENT_SERVER_DESCRIPTION
  "Rate-limit decision service (HTTP/JSON, forward-auth), in-memory or Redis-backed")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "redis-server")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME ratelimit-tools)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "ratelimit-sim (replays traffic through every algorithm) and ratelimit-bench (throughput, races)")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libratelimit-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "ratelimit C++20 library: headers, static libraries, CMake package (find_package(ratelimit)), pkg-config files and the shared test vectors")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libstdc++-12-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "libhiredis-dev, libboost1.81-dev, nlohmann-json3-dev")

include(CPack)
