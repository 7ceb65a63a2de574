# parc_cuda_module(name serial): the CUDA backend (runtime/cuda/) as a shared
# module the runtime dlopens for `--device cuda`: against MPI (serial OFF) or the
# single-process MPI of runtime/serial/ (serial ON).  Needs PARC_ROOT (the
# source tree), the CUDA language and CUDAToolkit, and PARC_HAVE_NCCL with
# NCCL_INCLUDE_DIR / NCCL_LIBRARY.  Used by CMakeLists.txt and by the GPU-only
# build (bench/gpu_build/), so both compile the kernels alike.
function(parc_cuda_module name serial)
  file(GLOB PARC_RT_CUDA_SOURCES CONFIGURE_DEPENDS ${PARC_ROOT}/runtime/cuda/*.cu ${PARC_ROOT}/runtime/cuda/*.c)
  add_library(${name} SHARED ${PARC_RT_CUDA_SOURCES})
  if(serial)
    target_include_directories(${name} BEFORE PRIVATE ${PARC_ROOT}/runtime/serial)
  else()
    target_include_directories(${name} PRIVATE ${MPI_C_INCLUDE_DIRS})
    target_link_libraries(${name} PRIVATE MPI::MPI_C)
  endif()
  target_include_directories(${name} PRIVATE ${PARC_ROOT}/include ${PARC_ROOT}/runtime ${PARC_ROOT}/runtime/cuda)
  target_compile_definitions(${name} PRIVATE PRT_HAVE_CUDA $<$<BOOL:${PARC_HAVE_NCCL}>:PRT_HAVE_NCCL> OMPI_SKIP_MPICXX)
  # warnings are errors in the CUDA sources too: nvcc's own and the host compiler's
  target_compile_options(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror;--Werror=all-warnings>")
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 17 CUDA_RUNTIME_LIBRARY Shared
                        BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
  target_link_libraries(${name} PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt stdc++)
  if(PARC_HAVE_NCCL)
    target_include_directories(${name} PRIVATE ${NCCL_INCLUDE_DIR})
    target_link_libraries(${name} PRIVATE ${NCCL_LIBRARY})
  endif()
endfunction()
