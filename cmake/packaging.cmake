# SPDX-License-Identifier: MIT
# The Debian packages, built by CPack from the install rules, one per install component:
#
#   cpack --config build/dev/CPackConfig.cmake
#     -> build/dev/package/tfslurm_<ver>-1+slurm<R>_amd64.deb        component tfslurm: the command,
#        its man page, completion, examples (installable on a login node: no Slurm dependency)
#     -> build/dev/package/tfslurm-spank_<ver>-1+slurm<R>_amd64.deb  component spank: the SPANK
#        plugin, spank_tfslurm(8), the plugin stack file (depends on slurmd of release R)
#
# Why CPack and not a debian/ directory: the package is exactly what `cmake --install` installs
# (one set of install rules, no second list of files to keep in step), it builds from any
# configured build directory in seconds without debhelper, and lintian finds no errors in it
# (tests/package checks that). docs/packaging.md has the details.
# Included by the top-level CMakeLists.txt after every install rule.

set(tfslurm_packaging_dir ${PROJECT_SOURCE_DIR}/packaging)
set(tfslurm_packaging_out ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${tfslurm_packaging_out})
set(TFSLURM_DEB_MAINTAINER "tfslurm authors <maintainers@users.noreply.a-seed-e420a899.example>"
    CACHE STRING "Maintainer field of the Debian package")
# The prefix the package installs to; the plugin's absolute path in tfslurm.conf follows it.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

# tfslurm_gzip(TARGET INPUT OUTPUT): OUTPUT is `gzip -9n INPUT` (-n: no name or time stamp in
# the header, so the package is reproducible), built with TARGET.
function(tfslurm_gzip target input output)
    add_custom_command(
        OUTPUT ${output}
        COMMAND sh -c [[gzip -9nc -- "$1" >"$2"]] tfslurm_gzip ${input} ${output}
        DEPENDS ${input}
        VERBATIM)
    add_custom_target(${target} ALL DEPENDS ${output})
endfunction()

# Man pages, compressed as Debian policy wants them.
tfslurm_gzip(tfslurm_man1 ${PROJECT_SOURCE_DIR}/man/tfslurm.1 ${tfslurm_packaging_out}/tfslurm.1.gz)
install(FILES ${tfslurm_packaging_out}/tfslurm.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT tfslurm)

# Documentation: the DEP-5 copyright file and the Debian changelog in each package's own
# directory (Debian policy), the examples (whatever examples/ holds) with the command, and the
# SPANK plugin's licence note with the plugin (installed by plugins/spank).
tfslurm_gzip(tfslurm_changelog ${tfslurm_packaging_dir}/changelog.Debian
             ${tfslurm_packaging_out}/changelog.Debian.gz)
install(FILES ${tfslurm_packaging_dir}/copyright ${tfslurm_packaging_out}/changelog.Debian.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tfslurm)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        COMPONENT tfslurm OPTIONAL)

if(TARGET tfslurm_spank)
    install(FILES ${tfslurm_packaging_dir}/copyright ${tfslurm_packaging_out}/changelog.Debian.gz
            DESTINATION ${TFSLURM_SPANK_DOCDIR} COMPONENT spank)
    tfslurm_gzip(tfslurm_man8 ${PROJECT_SOURCE_DIR}/man/spank_tfslurm.8
                 ${tfslurm_packaging_out}/spank_tfslurm.8.gz)
    install(FILES ${tfslurm_packaging_out}/spank_tfslurm.8.gz
            DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT spank)
    # The commented plugin stack line: a conffile, inactive until the administrator enables it.
    if(IS_ABSOLUTE "${TFSLURM_SPANK_PLUGIN_DIR}")
        set(tfslurm_plugin_path "${TFSLURM_SPANK_PLUGIN_DIR}/spank_tfslurm.so")
    else()
        set(tfslurm_plugin_path
            "${CPACK_PACKAGING_INSTALL_PREFIX}/${TFSLURM_SPANK_PLUGIN_DIR}/spank_tfslurm.so")
    endif()
    configure_file(${tfslurm_packaging_dir}/tfslurm.conf.in ${tfslurm_packaging_out}/tfslurm.conf
                   @ONLY)
    install(FILES ${tfslurm_packaging_out}/tfslurm.conf DESTINATION ${TFSLURM_PLUGSTACK_DIR}
            COMPONENT spank)
    # The RPM spec for EL sites (tests/package/check_rpm.sh builds it with rpmbuild).
    configure_file(${tfslurm_packaging_dir}/tfslurm.spec.in ${tfslurm_packaging_out}/tfslurm.spec
                   @ONLY)
    if(IS_ABSOLUTE "${TFSLURM_PLUGSTACK_DIR}")
        file(WRITE ${tfslurm_packaging_out}/conffiles "${TFSLURM_PLUGSTACK_DIR}/tfslurm.conf\n")
        set(CPACK_DEBIAN_SPANK_PACKAGE_CONTROL_EXTRA ${tfslurm_packaging_out}/conffiles)
    endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tfslurm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
set(CPACK_STRIP_FILES ON)
# Two packages, as the RPMs (packaging/tfslurm.spec.in) and pyxis: the command, which a login
# node without slurmd installs, and the plugin, tied to its Slurm release.
set(CPACK_DEB_COMPONENT_INSTALL ON)
if(TARGET tfslurm_spank)
    set(CPACK_COMPONENTS_ALL tfslurm spank)
else()
    set(CPACK_COMPONENTS_ALL tfslurm)
endif()
set(CPACK_DEBIAN_TFSLURM_PACKAGE_NAME tfslurm)
set(CPACK_DEBIAN_SPANK_PACKAGE_NAME tfslurm-spank)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Both versions say which Slurm release the plugin is built for (0.1.0-1+slurm22.05): the two
# packages come from one build. Only the plugin depends on that release's slurmd (Slurm loads
# only plugins of its own release); the command loads libslurm at run time when it is there
# and needs nothing of Slurm otherwise.
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TFSLURM_DEB_RELEASE})
# The plugin also depends on the command of its own build: --tfslurm=run starts /usr/bin/tfslurm.
if(TARGET tfslurm_spank AND TFSLURM_SLURM_RELEASE)
    set(CPACK_DEBIAN_SPANK_PACKAGE_DEPENDS
        "slurmd (>= ${TFSLURM_SLURM_RELEASE}), slurmd (<< ${TFSLURM_SLURM_NEXT_RELEASE}), tfslurm (= ${PROJECT_VERSION}-${TFSLURM_DEB_RELEASE})"
    )
endif()
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TFSLURM_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_SPANK_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_TFSLURM_PACKAGE_SUGGESTS "slurm-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Each package's description, wrapped for `apt show` (lintian: lines under 80 columns); its
# first line is the package's synopsis. CPack's DEB generator would put a package-wide
# CPACK_PACKAGE_DESCRIPTION_SUMMARY in front of both unless it is CPack's own default text.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
string(
    JOIN "\n" CPACK_DEBIAN_TFSLURM_DESCRIPTION
    "${PROJECT_DESCRIPTION}"
    "tfslurm gives every task of a Slurm step its distributed-training settings:"
    "TF_CONFIG for TensorFlow, MASTER_ADDR, RANK and WORLD_SIZE for PyTorch, the"
    "tf4slurm server dictionary and CUDA_VISIBLE_DEVICES, with ports that cannot"
    "collide. 'tfslurm env' prints them inside a task, 'tfslurm plan' previews a"
    "layout, and 'tfslurm run' launches the trainer and ends the step when the"
    "training is done."
    "."
    "This package holds the command, which needs no Slurm installation of its"
    "own (a login node can preview plans and read event logs); the SPANK plugin"
    "is in tfslurm-spank.")
string(
    JOIN "\n" CPACK_DEBIAN_SPANK_DESCRIPTION
    "SPANK plugin adding --tfslurm to srun, sbatch and salloc"
    "spank_tfslurm.so sets TF_CONFIG and tfslurm's other variables in every task"
    "of the steps that ask for it with --tfslurm, or starts every task under"
    "'tfslurm run' (--tfslurm=run). Not enabled after installation: remove the"
    "'#' in front of one line of /etc/slurm/plugstack.conf.d/tfslurm.conf."
    "."
    "The plugin is built for Slurm ${TFSLURM_SLURM_RELEASE}, the only release that loads it.")
include(CPack)
