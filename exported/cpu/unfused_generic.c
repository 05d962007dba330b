/*
 * exported/cpu/unfused_generic.c - the generic kernel of an unfused call in lntune_kernels.c,
 * by op, affine and types. Copied after the generic kernels and their tables.
 */
/* The generic kernel of an unfused call of op and tuple (affine: 0 neither, 1 gamma, 2 beta
 * only); streams: the copy with non-temporal stores where there is one. */
static lntune_kernel_fn unfused_generic(int op, int affine, int xt, int yt, int pt, int streams) {
    if (!(xt | yt | pt)) {
        if (streams && affine < 2 && streaming_f32[op][affine]) return streaming_f32[op][affine];
        return generic_f32[op][affine];
    }
    if (affine == 2) return typed_generic[op][xt][yt][pt];
    if (streams && typed_streaming[op][affine][xt][yt][pt])
        return typed_streaming[op][affine][xt][yt][pt];
    if (typed_builtin[op][affine][xt][yt][pt]) return typed_builtin[op][affine][xt][yt][pt];
    return typed_generic[op][xt][yt][pt];
}
