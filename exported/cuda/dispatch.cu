/*
 * exported/cuda/dispatch.cu - the host side of lntune_kernels.cu, which `lntune export` writes:
 * errors, the current GPU's table, the call's checks and its launch, for every GPU the file was
 * tuned on. Copied after the kernels and their tables.
 */
constexpr int MAX_DEVICES = 64;
constexpr int64_t DEFAULT_SMEM = 48 * 1024; /* more needs cudaFuncSetAttribute */
constexpr int NGPUS = (int)(sizeof gpus / sizeof gpus[0]);
constexpr int NKERNELS = (int)(sizeof kernels / sizeof kernels[0]);

/* Per device ordinal: 0 not yet seen, g + 1 it is gpus[g], -1 it is none of them. */
std::atomic<int> device_gpu[MAX_DEVICES];
/* Per kernel: the devices (bits) whose shared memory limit it has already raised. */
std::atomic<unsigned long long> smem_raised[NKERNELS];
thread_local char message[512];

int fail(int rc, const char *what, cudaError_t e) {
    if (e != cudaSuccess)
        snprintf(message, sizeof message, "%s: %s (%s)", what, cudaGetErrorName(e),
                 cudaGetErrorString(e));
    else
        snprintf(message, sizeof message, "%s", what);
    return rc;
}

/* Which of gpus the current device is: the same name and compute capability, else the same
 * compute capability. Looked up once per device. */
int current_gpu(int *gpu, int *device) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return fail(LNTUNE_ENODEVICE, "cudaGetDevice", e);
    const bool cached = dev >= 0 && dev < MAX_DEVICES;
    int known = cached ? device_gpu[dev].load(std::memory_order_acquire) : 0;
    if (known == 0) {
        int major = 0, minor = 0;
        cudaDeviceProp prop;
        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) ||
            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) ||
            (e = cudaGetDeviceProperties(&prop, dev)))
            return fail(LNTUNE_ENODEVICE, "reading the device's compute capability", e);
        const int cc = 10 * major + minor;
        known = -1;
        for (int g = 0; g < NGPUS && known < 0; ++g)
            if (gpus[g].cc == cc && std::strcmp(gpus[g].name, prop.name) == 0) known = g + 1;
        for (int g = 0; g < NGPUS && known < 0; ++g)
            if (gpus[g].cc == cc) known = g + 1;
        if (known < 0) {
            snprintf(message, sizeof message,
                     "device %d (%.200s, sm_%d) is none of the GPUs these kernels were "
                     "tuned on (see lntune_kernels.cu)",
                     dev, prop.name, cc);
            if (cached) device_gpu[dev].store(known, std::memory_order_release);
            return LNTUNE_ENODEVICE;
        }
        if (cached) device_gpu[dev].store(known, std::memory_order_release);
    }
    if (known < 0)
        return fail(LNTUNE_ENODEVICE,
                    "the current device is none of the GPUs these kernels "
                    "were tuned on",
                    cudaSuccess);
    *gpu = known - 1;
    *device = dev;
    return LNTUNE_OK;
}

/* The winner of (gpu, op, fusion, types, H, affine) for rows: its bucket, else the nearest
 * tuned bucket (as liblntune and the exported C kernels choose); -1 if none. */
int find_tuned(int gpu, int op, int fusion, int types, int64_t H, int affine, int64_t rows) {
    int best = -1;
    double best_distance = 0.0;
    for (int i = 0; i < GENERIC; ++i) {
        const kernel_entry *e = &kernels[i];
        if (e->gpu != gpu || e->op != op || e->fusion != fusion || e->types != types || e->H != H ||
            e->affine != affine)
            continue;
        if (e->max_h > 0 && H > e->max_h) continue;
        if (rows >= e->rows_lo && rows <= e->rows_hi) return i;
        double d = rows < e->rows_lo ? (double)e->rows_lo / (double)rows
                                     : (double)rows / (double)e->rows_hi;
        if (best < 0 || d < best_distance) best = i, best_distance = d;
    }
    return best;
}

/* The generic kernel of (op, fusion, types, affine); -1 if none was exported. */
int find_generic(int op, int fusion, int types, int affine) {
    for (int i = GENERIC; i < NKERNELS; ++i) {
        const kernel_entry *e = &kernels[i];
        if (e->op == op && e->fusion == fusion && e->types == types && e->affine == affine)
            return i;
    }
    return -1;
}
/* Launches kernels[i] as its launch line says (core/cuda/cuda_launch.c's rules). */
int launch(int i, int device, const lntune_kernel_args &a, cudaStream_t stream) {
    const kernel_entry *e = &kernels[i];
    if (e->max_h > 0 && a.H > e->max_h)
        return fail(LNTUNE_EUNSUPPORTED, "H exceeds the kernel's shared memory", cudaSuccess);
    int64_t groups = (a.rows + e->rows_per_block - 1) / e->rows_per_block;
    if (groups > INT32_MAX / e->cluster) groups = INT32_MAX / e->cluster;
    const int64_t per_block = (a.H + e->cluster - 1) / e->cluster;
    const int64_t smem = e->smem + e->smem_per_h * ((per_block + 3) / 4 * 4);
    if (smem > DEFAULT_SMEM) {
        const unsigned long long bit = 1ull << (device % 64);
        if (device >= 64 || !(smem_raised[i].load(std::memory_order_acquire) & bit)) {
            cudaError_t err = cudaFuncSetAttribute(
                (const void *)e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
            if (err != cudaSuccess)
                return fail(LNTUNE_ERROR, "cudaFuncSetAttribute (shared memory)", err);
            smem_raised[i].fetch_or(bit, std::memory_order_release);
        }
    }
    e->fn<<<dim3((unsigned)(groups * e->cluster)), dim3((unsigned)e->block), (size_t)smem,
            stream>>>(a);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? LNTUNE_OK : fail(LNTUNE_ERROR, "kernel launch", err);
}

/* The argument checks that need no GPU; LNTUNE_OK or the error with its message. */
int check(int op, const lntune_kernel_args *args, int xt, int yt, int pt, int rt, int qk) {
    if (!args || !args->x || !args->y || args->H <= 0 || args->rows < 0 || args->eps < 0.0f ||
        args->eps != args->eps)
        return fail(LNTUNE_EINVAL, "NULL args, x or y, H <= 0, rows < 0, or eps < 0 or NaN",
                    cudaSuccess);
    if (xt < 0 || yt < 0 || pt < 0 || rt < 0)
        return fail(LNTUNE_EINVAL,
                    "a type outside LNTUNE_KERNELS_DEFAULT..LNTUNE_KERNELS_BF16 (y: "
                    "..LNTUNE_KERNELS_FP8_E4M3)",
                    cudaSuccess);
    if (op == 1 && args->beta) return fail(LNTUNE_EINVAL, "RMSNorm takes no beta", cudaSuccess);
    if (args->residual_out && !args->residual)
        return fail(LNTUNE_EINVAL, "residual_out without residual", cudaSuccess);
    if (args->beta && !args->gamma)
        return fail(LNTUNE_EUNSUPPORTED, "beta without gamma is not supported", cudaSuccess);
    if (!lntune_scale_valid(args, qk))
        return fail(LNTUNE_EINVAL,
                    "a quantized y needs y_scales, or a y_scale that is finite and >= 2^-126",
                    cudaSuccess);
    if (!lntune_offset_valid(args))
        return fail(LNTUNE_EINVAL, "a weight offset must be finite and come with gamma",
                    cudaSuccess);
    return LNTUNE_OK;
}

int run(int op, const lntune_kernel_args *args, lntune_kernels_types t, cudaStream_t stream) {
    static const char *const type_names[] = {"f32", "f16", "bf16"};
    static const char *const quant_names[] = {"i8", "i8row", "e4m3", "e4m3row"};
    const int qk = args ? lntune_quant_kind(args, t.y) : -1;
    /* y's type; with a quantized y, 0 (the fp32 y its codes are taken from) and qk */
    const int xt = lntune_internal_type(t.x, 0), yt = qk >= 0 ? 0 : lntune_internal_type(t.y, xt),
              pt = lntune_internal_type(t.params, xt), rt = lntune_internal_type(t.residual, xt);
    int rc = check(op, args, xt, yt, pt, rt, qk);
    if (rc != LNTUNE_OK) return rc;
    lntune_kernel_args a = *args;
    if (!lntune_complete_args(&a))
        return fail(LNTUNE_EINVAL, "a stride is neither 0 nor >= H", cudaSuccess);
    if (a.rows == 0) return LNTUNE_OK;
    int gpu = 0, device = 0;
    if ((rc = current_gpu(&gpu, &device)) != LNTUNE_OK) return rc;
    const int offset = a.weight_offset != 0.0f;
    const int affine = offset ? 3 : a.gamma != nullptr;
    const int fusion = !a.residual ? 0 : a.residual_out ? 2 : 1;
    const int types = lntune_pack_types(xt, yt, pt, rt, qk, fusion);
    int i = find_tuned(gpu, op, fusion, types, a.H, affine, a.rows);
    if (i < 0) i = find_generic(op, fusion, types, affine);
    if (i < 0) {
        const char *y = qk >= 0 ? quant_names[qk] : type_names[yt];
        snprintf(message, sizeof message,
                 "no kernel for x %s, y %s, gamma/beta %s%s%s%s%s was exported (the CUDA export "
                 "holds the type tuples and fusions tuned on a GPU, and all-fp32): tune one "
                 "(lntune --target cuda --dtype %s/%s/%s%s%s) and export again",
                 type_names[xt], y, type_names[pt], fusion ? ", residual " : "",
                 fusion ? type_names[rt] : "", fusion == 2 ? " and residual_out" : "",
                 offset ? ", a weight offset" : "", type_names[xt], y, type_names[pt],
                 fusion == 2 ? " --residual"
                 : fusion    ? " --residual=noout"
                             : "",
                 offset ? " --weight-offset" : "");
        return LNTUNE_EUNSUPPORTED;
    }
    return launch(i, device, a, stream);
}

} // namespace

extern "C" int lntune_kernels_cuda_layernorm(const lntune_kernel_args *args, cudaStream_t stream) {
    return run(0, args, lntune_kernels_types{0, 0, 0, 0}, stream);
}

extern "C" int lntune_kernels_cuda_rmsnorm(const lntune_kernel_args *args, cudaStream_t stream) {
    return run(1, args, lntune_kernels_types{0, 0, 0, 0}, stream);
}

extern "C" int lntune_kernels_cuda_layernorm_v2(const lntune_kernel_args *args,
                                                lntune_kernels_types types, cudaStream_t stream) {
    return run(0, args, types, stream);
}

extern "C" int lntune_kernels_cuda_rmsnorm_v2(const lntune_kernel_args *args,
                                              lntune_kernels_types types, cudaStream_t stream) {
    return run(1, args, types, stream);
}

extern "C" const char *lntune_kernels_cuda_errmsg(void) {
    return message;
}
