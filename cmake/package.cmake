# package.cmake - the Debian package (`cpack -G DEB`): cohort_<version>_<arch>.deb with what
# `cmake --install` lays out (cohortd, cohortctl, the handlers, cohort/handler.h, the pkg-config
# file, the man pages and bash completions), plus, with -DCOHORT_PACKAGE=ON only, what a plain
# install must not write: the systemd unit and an example /etc/cohort/cohort.ini (a conffile).
# The maintainer scripts (deploy/debian/) create and remove the `cohort` system user.
#
# Build it (README.md, "Install"): a tree configured for /usr,
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DCOHORT_PACKAGE=ON -DCOHORT_TESTS=OFF
#   cmake --build build-deb -j2 && (cd build-deb && cpack -G DEB)
# tests/package/run.sh builds, installs, uses and removes it.

if(COHORT_PACKAGE)
  # The unit starts the cohortd of this prefix; the example config names this prefix's handlers.
  # Both written at install time, like the pkg-config file, for the prefix installed to.
  install(CODE "
    file(READ \"${CMAKE_SOURCE_DIR}/deploy/systemd/cohortd.service\" unit)
    string(REPLACE \"/usr/local/bin/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/\" unit \"\${unit}\")
    file(WRITE \"${CMAKE_BINARY_DIR}/package/cohortd.service\" \"\${unit}\")
    file(READ \"${CMAKE_SOURCE_DIR}/deploy/cohort.example.ini\" ini)
    string(REPLACE \"../build/handlers/\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/cohort/handlers/\" ini \"\${ini}\")
    file(WRITE \"${CMAKE_BINARY_DIR}/package/cohort.ini\" \"\${ini}\")")
  install(FILES ${CMAKE_BINARY_DIR}/package/cohortd.service DESTINATION lib/systemd/system)
  install(FILES ${CMAKE_BINARY_DIR}/package/cohort.ini DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/cohort)
endif()

set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Cohort maintainers <cohort@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Leader-elected task service on MongoDB")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "cohortd runs task handlers on a cluster of nodes coordinated through MongoDB; cohortctl "
    "operates it. Includes the shipped handlers, the header and pkg-config file for writing "
    "handlers, man pages, bash completions and a systemd unit.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # cohort_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
# Runtime libraries as the build linked them, named by dpkg-shlibdeps (libmongoc-1.0-0,
# libbson-1.0-0, libevent-2.1-7, libinih1, libssl3, libsystemd0, ...); adduser for postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# Building a handler against cohort/handler.h needs the compiler, pkg-config and libbson's headers.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libbson-dev, pkg-config, gcc")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/deploy/debian/postinst ${CMAKE_SOURCE_DIR}/deploy/debian/postrm
    ${CMAKE_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)
