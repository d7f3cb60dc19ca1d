# What a debug build costs (docs/testing.md, "What the build costs"). A debug build (the sanitized
# one of scripts/build.sh and scripts/test.sh, and the unsanitized external project of
# tests/integration/) keeps every check and all its debug information (the sanitizers and -g are
# set in CMakeLists.txt, untouched here), and packs its relative relocations
# (-z pack-relative-relocs, glibc 2.36): the pointers in the sanitizers' per-check data, tens of
# megabytes of 24-byte relocation entries in a sanitized program, take 8 bytes or less each.
# Its static libraries are thin archives (below). The release build and the fuzz build link as
# before.
include_guard(GLOBAL)
include(CheckLinkerFlag)

if(CMAKE_BUILD_TYPE STREQUAL "Debug" AND NOT REGENT_FUZZ)
  check_linker_flag(CXX "LINKER:-z,pack-relative-relocs" REGENT_LINKER_PACKS_RELOCS)
  if(REGENT_LINKER_PACKS_RELOCS)
    add_link_options(LINKER:-z,pack-relative-relocs)
  endif()
  # The project's static libraries are thin archives: an index and the paths of their objects,
  # which stay where they were compiled, rather than a second copy of every object (0.7 GB of a
  # sanitized build). GNU ar and llvm-ar both make them with `T`; the linker reads the objects
  # the archive names.
  foreach(lang C CXX)
    set(CMAKE_${lang}_ARCHIVE_CREATE "<CMAKE_AR> qcT <TARGET> <LINK_FLAGS> <OBJECTS>")
    set(CMAKE_${lang}_ARCHIVE_APPEND "<CMAKE_AR> qT <TARGET> <LINK_FLAGS> <OBJECTS>")
  endforeach()
endif()
