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

# Debian's copyright file in each package (the licence is Apache-2.0, whose text every Debian
# system has as /usr/share/common-licenses/Apache-2.0).
foreach(ratelimit_pkg server:ratelimitd tools:ratelimit-tools dev:libratelimit-dev)
  string(REPLACE ":" ";" ratelimit_pkg "${ratelimit_pkg}")
  list(GET ratelimit_pkg 0 ratelimit_component)
  list(GET ratelimit_pkg 1 ratelimit_name)
  if(ratelimit_component STREQUAL "dev" OR (ratelimit_component STREQUAL "server" AND TARGET ratelimitd)
     OR (ratelimit_component STREQUAL "tools" AND TARGET ratelimit-sim))
    install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${ratelimit_name}
            COMPONENT ${ratelimit_component} EXCLUDE_FROM_ALL)
  endif()
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ratelimit)
set(CPACK_PACKAGE_VENDOR "ratelimit authors")
# Maintainer and homepage are the distributor's: whoever builds the packages names themself
# (RATELIMIT_PACKAGE_MAINTAINER, else Debian's DEBFULLNAME/DEBEMAIL, else the local user and
# host, as dh_make does) and, once the project is published, its address
# (RATELIMIT_HOMEPAGE_URL; empty: no Homepage field). Nothing points at a placeholder domain.
if(DEFINED ENV{DEBEMAIL})
  set(ratelimit_default_maintainer "$ENV{DEBFULLNAME} <$ENV{DEBEMAIL}>")
else()
  cmake_host_system_information(RESULT ratelimit_host QUERY FQDN)
  set(ratelimit_user "$ENV{USER}")
  if(ratelimit_user STREQUAL "")
    set(ratelimit_user root)
  endif()
  set(ratelimit_default_maintainer "ratelimit local build <${ratelimit_user}@${ratelimit_host}>")
endif()
string(STRIP "${ratelimit_default_maintainer}" ratelimit_default_maintainer)
set(RATELIMIT_PACKAGE_MAINTAINER "${ratelimit_default_maintainer}"
    CACHE STRING "Maintainer field of the Debian packages (Name <mail>)")
set(RATELIMIT_HOMEPAGE_URL "" CACHE STRING "Homepage field of the Debian packages (empty: none)")
set(CPACK_PACKAGE_CONTACT "${RATELIMIT_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RATELIMIT_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server tools dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
if(RATELIMIT_HOMEPAGE_URL)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${RATELIMIT_HOMEPAGE_URL}")
endif()
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME ratelimitd)
set(CPACK_COMPONENT_SERVER_DESCRIPTION
  "Rate-limit decision service (HTTP/JSON, forward-auth), in-memory or Redis-backed")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
                                              ${PROJECT_SOURCE_DIR}/packaging/debian/postinst)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# postinst creates the user with useradd (passwd) and reads /etc/passwd with grep and awk.
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "redis-server")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME ratelimit-tools)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "ratelimit-sim (replays traffic through every algorithm) and ratelimit-bench (throughput, races)")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libratelimit-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "ratelimit C++20 library: headers, static libraries, CMake package (find_package(ratelimit)), pkg-config files and the shared test vectors")
# What compiling against the installed headers, CMake package and pkg-config files needs:
# ratelimit::redis and ratelimit-redis.pc use hiredis, OpenSSL and the Boost.Asio headers; the
# test-vector runner nlohmann-json. tests/packaging/check_debs.sh derives this list from the
# installed files and fails when a package is missing here.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libstdc++-12-dev, libhiredis-dev, libssl-dev, libboost1.81-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "cmake, pkg-config")

include(CPack)
