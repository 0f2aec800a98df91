# SPDX-License-Identifier: BSD-3-Clause
# The project's CMake functions (included by the top-level CMakeLists.txt before any part).
#
# nvmelab_install_command(<target>): where a native command the Python package runs by name goes
# (nvmelab-serve, nvmelab-blksum). In a wheel (scikit-build) it is installed into the scripts directory, the
# environment's bin/; in the development layout (NVMELAB_INPLACE) it is copied next to the venv's python after
# every link, so that it is on PATH wherever the venv is active. Elsewhere it stays in the build tree.
function(nvmelab_install_command target)
  if(SKBUILD)
    install(TARGETS ${target} RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
  elseif(NVMELAB_INPLACE AND Python_EXECUTABLE)
    get_filename_component(venv_bin "${Python_EXECUTABLE}" DIRECTORY)
    add_custom_command(TARGET ${target} POST_BUILD
                       COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:${target}> ${venv_bin}/${target}
                       COMMENT "${target} -> ${venv_bin}")
  endif()
endfunction()

# nvmelab_link_test_libs(<target>): a C test or fuzz harness links every library it may exercise: the engine
# (and through it the driver), libblksum and the vfio-user server, each when this build has it.
function(nvmelab_link_test_libs target)
  target_link_libraries(${target} PRIVATE nvmelab_engine nvmelab_driver)
  foreach(lib blksum nvmelab_serve)
    if(TARGET ${lib})
      target_link_libraries(${target} PRIVATE ${lib})
    endif()
  endforeach()
endfunction()
