# SPDX-License-Identifier: MIT
# The Debian package, built by CPack from the install rules:
#
#   cpack --config build/dev/CPackConfig.cmake     -> build/dev/package/tfslurm_<ver>-1_amd64.deb
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
install(FILES ${tfslurm_packaging_out}/tfslurm.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# Documentation: the DEP-5 copyright file, the Debian changelog, the examples (whatever
# examples/ holds) and the SPANK plugin's licence note (installed by plugins/spank).
tfslurm_gzip(tfslurm_changelog ${tfslurm_packaging_dir}/changelog.Debian
             ${tfslurm_packaging_out}/changelog.Debian.gz)
install(FILES ${tfslurm_packaging_dir}/copyright ${tfslurm_packaging_out}/changelog.Debian.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        OPTIONAL)

if(TARGET tfslurm_spank)
    tfslurm_gzip(tfslurm_man8 ${PROJECT_SOURCE_DIR}/man/spank_tfslurm.8
                 ${tfslurm_packaging_out}/spank_tfslurm.8.gz)
    install(FILES ${tfslurm_packaging_out}/spank_tfslurm.8.gz
            DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
    # The commented plugin stack line: a conffile, inactive until the administrator enables it.
    if(IS_ABSOLUTE "${TFSLURM_SPANK_PLUGIN_DIR}")
        set(tfslurm_plugin_path "${TFSLURM_SPANK_PLUGIN_DIR}/spank_tfslurm.so")
    else()
        set(tfslurm_plugin_path
            "${CPACK_PACKAGING_INSTALL_PREFIX}/${TFSLURM_SPANK_PLUGIN_DIR}/spank_tfslurm.so")
    endif()
    configure_file(${tfslurm_packaging_dir}/tfslurm.conf.in ${tfslurm_packaging_out}/tfslurm.conf
                   @ONLY)
    install(FILES ${tfslurm_packaging_out}/tfslurm.conf DESTINATION ${TFSLURM_PLUGSTACK_DIR})
    # The RPM spec for EL sites (tests/package/check_rpm.sh builds it with rpmbuild).
    configure_file(${tfslurm_packaging_dir}/tfslurm.spec.in ${tfslurm_packaging_out}/tfslurm.spec
                   @ONLY)
    if(IS_ABSOLUTE "${TFSLURM_PLUGSTACK_DIR}")
        file(WRITE ${tfslurm_packaging_out}/conffiles "${TFSLURM_PLUGSTACK_DIR}/tfslurm.conf\n")
        set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${tfslurm_packaging_out}/conffiles)
    endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tfslurm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# The package's version says which Slurm release its plugin is built for (0.1.0-1+slurm22.05),
# and it depends on that release's slurmd: Slurm loads only plugins of its own release.
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TFSLURM_DEB_RELEASE})
if(TARGET tfslurm_spank AND TFSLURM_SLURM_RELEASE)
    set(CPACK_DEBIAN_PACKAGE_DEPENDS
        "slurmd (>= ${TFSLURM_SLURM_RELEASE}), slurmd (<< ${TFSLURM_SLURM_NEXT_RELEASE})")
endif()
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TFSLURM_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Slurm-aware cluster resolver and launcher for distributed training")
# The extended description, wrapped for `apt show` (lintian: lines under 80 columns).
string(
    JOIN "\n" CPACK_PACKAGE_DESCRIPTION
    "tfslurm gives every task of a Slurm step its distributed-training settings:"
    "TF_CONFIG for TensorFlow, MASTER_ADDR, RANK and WORLD_SIZE for PyTorch, the"
    "tf4slurm server dictionary and CUDA_VISIBLE_DEVICES, with ports that cannot"
    "collide. 'tfslurm env' prints them inside a task, 'tfslurm plan' previews a"
    "layout, and 'tfslurm run' launches the trainer and ends the step when the"
    "training is done."
    "."
    "The package also holds the SPANK plugin spank_tfslurm.so, which adds"
    "--tfslurm to srun, sbatch and salloc once enabled in"
    "/etc/slurm/plugstack.conf.d/tfslurm.conf."
    "The plugin is built for Slurm ${TFSLURM_SLURM_RELEASE}, the only release that loads it.")
include(CPack)
