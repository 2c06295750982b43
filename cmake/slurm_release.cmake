# SPDX-License-Identifier: MIT
# TFSLURM_SLURM_RELEASE: the Slurm release (`22.05`) whose slurm/slurm_version.h the SPANK plugin
# is compiled against, and TFSLURM_SLURM_NEXT_RELEASE, the first version past it (`22.06`): the
# packages say which release their plugin is for and depend on it (cmake/packaging.cmake).
# Empty when the header is not found (no plugin). TFSLURM_DEB_RELEASE is the Debian revision
# that says so (1+slurm22.05, or 1 without a plugin). Included by the top-level CMakeLists.txt.
set(TFSLURM_SLURM_RELEASE "")
set(TFSLURM_SLURM_NEXT_RELEASE "")
find_file(TFSLURM_SLURM_VERSION_H slurm/slurm_version.h)
if(TFSLURM_SLURM_VERSION_H)
    file(STRINGS ${TFSLURM_SLURM_VERSION_H} tfslurm_version_line
         REGEX "^#define[ \t]+SLURM_VERSION_NUMBER[ \t]+0x[0-9a-fA-F]+")
    if(tfslurm_version_line MATCHES "(0x[0-9a-fA-F]+)")
        math(EXPR tfslurm_slurm_major "(${CMAKE_MATCH_1} >> 16) & 255")
        math(EXPR tfslurm_slurm_minor "(${CMAKE_MATCH_1} >> 8) & 255")
        math(EXPR tfslurm_slurm_next "${tfslurm_slurm_minor} + 1")
        foreach(var tfslurm_slurm_minor tfslurm_slurm_next)
            if(${var} LESS 10)
                set(${var} "0${${var}}")
            endif()
        endforeach()
        set(TFSLURM_SLURM_RELEASE "${tfslurm_slurm_major}.${tfslurm_slurm_minor}")
        set(TFSLURM_SLURM_NEXT_RELEASE "${tfslurm_slurm_major}.${tfslurm_slurm_next}")
    endif()
endif()
if(TFSLURM_BUILD_SPANK AND TFSLURM_SLURM_RELEASE)
    set(TFSLURM_DEB_RELEASE "1+slurm${TFSLURM_SLURM_RELEASE}")
else()
    set(TFSLURM_DEB_RELEASE 1)
endif()
