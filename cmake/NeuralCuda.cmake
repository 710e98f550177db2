# Resolves NEURAL_CUDA (ON/OFF/AUTO) into NEURAL_HAVE_CUDA. The CUDA backend is split
# (docs/CUDA.md "Driver API and fatbin"): nvcc compiles the kernels (engine/cuda/*.cu) into one
# fatbin that is embedded in the engine; the host code is plain C++ on the CUDA driver API, loaded
# at run time. nvcc and cuda.h are build-time tools only, so the same setup serves a native Linux
# build and the mingw-w64 cross-build for Windows (nvcc runs on the build machine in both).
set(NEURAL_HAVE_CUDA OFF)
if(NEURAL_CUDA STREQUAL "ON" OR NEURAL_CUDA STREQUAL "AUTO")
  find_program(NEURAL_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_PATH PATH_SUFFIXES bin
               NO_CMAKE_FIND_ROOT_PATH)
  if(NEURAL_NVCC)
    # cuda.h belongs to the toolkit this nvcc comes from. nvcc may be a wrapper script outside
    # the toolkit (/usr/local/bin/nvcc running /usr/local/cuda-13.0/bin/nvcc), so besides the
    # folder next to it, nvcc is asked where its toolkit is: `--dryrun` prints TOP and INCLUDES.
    get_filename_component(_neural_cuda_root "${NEURAL_NVCC}" DIRECTORY)
    get_filename_component(_neural_cuda_root "${_neural_cuda_root}" DIRECTORY)
    set(_neural_cuda_hints "${_neural_cuda_root}/include")
    set(_neural_probe "${CMAKE_BINARY_DIR}/CMakeFiles/neural_nvcc_probe.cu")
    file(WRITE "${_neural_probe}" "")
    execute_process(COMMAND "${NEURAL_NVCC}" --dryrun -c "${_neural_probe}" -o "${_neural_probe}.o"
                    OUTPUT_VARIABLE _neural_dry ERROR_VARIABLE _neural_dry RESULT_VARIABLE _neural_rc)
    string(REGEX MATCH "#\\$ TOP=([^\n]*)" _neural_top "${_neural_dry}")
    if(_neural_top)
      string(STRIP "${CMAKE_MATCH_1}" _neural_top)
      list(APPEND _neural_cuda_hints "${_neural_top}/include" "${_neural_top}/targets/x86_64-linux/include")
    endif()
    string(REGEX MATCH "#\\$ INCLUDES=\"-I([^\"]*)\"" _neural_inc "${_neural_dry}")
    if(_neural_inc)
      list(APPEND _neural_cuda_hints "${CMAKE_MATCH_1}")
    endif()
    find_path(NEURAL_CUDA_INCLUDE_DIR cuda.h HINTS ${_neural_cuda_hints} /usr/local/cuda/include
              ENV CUDA_PATH PATH_SUFFIXES include NO_CMAKE_FIND_ROOT_PATH
              DOC "The CUDA toolkit's include folder (cuda.h: driver API types and prototypes)")
  endif()
  if(NEURAL_NVCC AND EXISTS "${NEURAL_CUDA_INCLUDE_DIR}/cuda.h")
    set(NEURAL_HAVE_CUDA ON)
  elseif(NEURAL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "NEURAL_CUDA=ON but no CUDA toolkit was found: nvcc \"${NEURAL_NVCC}\", "
                        "cuda.h looked for in: ${_neural_cuda_hints} /usr/local/cuda/include $ENV{CUDA_PATH}")
  endif()
endif()
if(NEURAL_HAVE_CUDA)
  # The fatbin's GPUs: SASS for RTX 30 (86), RTX 40 (89), H100/H200 (90) and RTX 50 (120), plus
  # PTX of the lowest so newer GPUs JIT-compile it. A development build may narrow it
  # (-DCMAKE_CUDA_ARCHITECTURES=90, as the accelerator scripts do): each entry gives SASS, and
  # the lowest gets PTX too.
  if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(_neural_archs_default "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(_neural_archs_default "86;89;90;120")
  endif()
  set(NEURAL_CUDA_ARCHS "${_neural_archs_default}" CACHE STRING
      "GPU architectures of the embedded fatbin (SASS each, PTX for the lowest)")
endif()
message(STATUS "Neural: CUDA backend ${NEURAL_HAVE_CUDA}, GUI ${NEURAL_GUI}")
