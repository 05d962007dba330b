/* The arguments of a backward call as liblntune completes them: a stride of 0 is H, an eps
 * that is not positive 1e-5. Returns 0 when a given tensor's stride is below H. */
static int lntune_complete_backward_args(lntune_backward_kernel_args *a) {
    if (a->x_stride == 0) a->x_stride = a->H;
    if (a->dy_stride == 0) a->dy_stride = a->H;
    if (a->dx_stride == 0) a->dx_stride = a->H;
    if (a->dresidual_out_stride == 0) a->dresidual_out_stride = a->H;
    if (!(a->eps > 0.0f)) a->eps = 1e-5f;
    return a->x_stride >= a->H && a->dy_stride >= a->H && a->dx_stride >= a->H &&
           (!a->dresidual_out || a->dresidual_out_stride >= a->H);
}
