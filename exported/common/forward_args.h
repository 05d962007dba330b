/* The arguments of a forward call as liblntune completes them: a stride of 0 is H, an eps that
 * is not positive 1e-5. Returns 0 when a given tensor's stride is below H. */
static int lntune_complete_args(lntune_kernel_args *a) {
    if (a->x_stride == 0) a->x_stride = a->H;
    if (a->y_stride == 0) a->y_stride = a->H;
    if (a->residual_stride == 0) a->residual_stride = a->H;
    if (a->residual_out_stride == 0) a->residual_out_stride = a->H;
    if (!(a->eps > 0.0f)) a->eps = 1e-5f;
    return a->x_stride >= a->H && a->y_stride >= a->H &&
           (!a->residual || a->residual_stride >= a->H) &&
           (!a->residual_out || a->residual_out_stride >= a->H);
}
