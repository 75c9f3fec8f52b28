/* How much local memory one group may declare (ocl_mma.c): NVIDIA's OpenCL
 * reports 48 KiB (CL_DEVICE_LOCAL_MEM_SIZE), and a dynamic __local argument
 * stops there, but its compiler sizes static __local arrays up to the
 * per-block maximum a CUDA kernel can opt into (227 KiB on compute 9.0) and
 * its launches take them. The host builds this with -DWORDS=n (32-bit
 * words), runs one group of NT work-items and checks that each wrote 0:
 * every word written, then read back by another work-item. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) void local_probe(__global uint *out) {
    __local uint big[WORDS];
    const uint t = get_local_id(0);
    for (uint i = t; i < WORDS; i += NT) big[i] = i * 2654435761u + 7u;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint bad = 0;
    for (uint i = t; i < WORDS; i += NT) {
        const uint j = WORDS - 1 - i;
        bad += big[j] != j * 2654435761u + 7u;
    }
    out[t] = bad;
}
