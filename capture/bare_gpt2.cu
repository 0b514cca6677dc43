// A bare CUDA C++ GPT-2 forward with cuBLAS and no NVTX at all (issue 31): the kind of trace a compiled
// program leaves, whose iterations and layers nsight-tui has to infer from the kernel sequence.
// Pre-LN blocks as in GPT-2 (capture/model.py): per layer layer norm, QKV GEMM, split heads, scores
// (batched GEMM), causal softmax, @V (batched GEMM), merge heads, output projection, residual add,
// layer norm, MLP up GEMM, GELU, MLP down GEMM, residual add; an embedding gather first, the final
// layer norm and the LM head last. Weights are random: the kernels and their shapes are the point.
//
// cuBLAS is opened at run time (dlopen libcublas.so.13), so building needs only nvcc:
//   nvcc -O2 -arch=sm_90 -o bare_gpt2 capture/bare_gpt2.cu -ldl
//   LD_LIBRARY_PATH=<folder of libcublas.so.13> ./bare_gpt2 STEPS LAYERS CTX BATCH OUT.steps.json
// Each step ends with cudaDeviceSynchronize; its host-clock time goes into OUT.steps.json in the
// format of `capture --no-nvtx`'s STEM.steps.json ({"config": {...}, "steps": [{"name", "seconds"}]}).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <vector>
#include <cuda_runtime.h>

typedef void *Handle;
typedef int (*CreateFn)(Handle *);
typedef int (*GemmFn)(Handle, int, int, int, int, int, const float *, const float *, int, const float *, int,
                      const float *, float *, int);
typedef int (*BatchedFn)(Handle, int, int, int, int, int, const float *, const float *, int, long long,
                         const float *, int, long long, const float *, float *, int, long long, int);
static GemmFn gemm_fn;
static BatchedFn batched_fn;
static Handle handle;
static const int OP_N = 0, OP_T = 1;

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// C[M,N] = A[M,K] . B[K,N], row-major (cuBLAS is column-major: C^T = B^T A^T)
static void gemm(const float *A, const float *B, float *C, int M, int N, int K) {
    const float one = 1.f, zero = 0.f;
    if (gemm_fn(handle, OP_N, OP_N, N, M, K, &one, B, N, A, K, &zero, C, N)) { fprintf(stderr, "gemm\n"); exit(1); }
}

__global__ void embed(const int *tokens, const float *wte, const float *wpe, float *x, int T, int d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int row = i / d, col = i % d;
    x[i] = wte[tokens[row] * d + col] + wpe[(row % T) * d + col];
}

__global__ void layer_norm(const float *x, float *y, int d) {  // one block per row
    __shared__ float s1[256], s2[256];
    const float *r = x + (size_t)blockIdx.x * d;
    float a = 0.f, b = 0.f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) { a += r[j]; b += r[j] * r[j]; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) { s1[threadIdx.x] += s1[threadIdx.x + s]; s2[threadIdx.x] += s2[threadIdx.x + s]; }
        __syncthreads();
    }
    float mean = s1[0] / d, inv = rsqrtf(s2[0] / d - mean * mean + 1e-5f);
    for (int j = threadIdx.x; j < d; j += blockDim.x) y[(size_t)blockIdx.x * d + j] = (r[j] - mean) * inv;
}

// qkv [B,T,3,H,dh] -> q, k, v [B,H,T,dh]
__global__ void split_heads(const float *qkv, float *q, float *k, float *v, int B, int T, int H, int dh) {
    size_t n = (size_t)B * T * H * dh, i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    int e = i % dh, h = (i / dh) % H, t = (i / dh / H) % T, b = i / dh / H / T;
    size_t src = (((size_t)b * T + t) * 3 * H + h) * dh + e, dst = (((size_t)b * H + h) * T + t) * dh + e;
    q[dst] = qkv[src]; k[dst] = qkv[src + (size_t)H * dh]; v[dst] = qkv[src + 2 * (size_t)H * dh];
}

__global__ void causal_softmax(float *s, int T, float scale) {  // one block per row of [B*H*T, T]
    __shared__ float red[256];
    float *r = s + (size_t)blockIdx.x * T;
    int t = blockIdx.x % T;
    float m = -1e30f;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) m = fmaxf(m, r[j] * scale);
    red[threadIdx.x] = m; __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < T; j += blockDim.x) { float e = j <= t ? __expf(r[j] * scale - m) : 0.f; r[j] = e; sum += e; }
    red[threadIdx.x] = sum; __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    float inv = 1.f / red[0];
    for (int j = threadIdx.x; j < T; j += blockDim.x) r[j] *= inv;
}

// o [B,H,T,dh] -> y [B,T,H*dh]
__global__ void merge_heads(const float *o, float *y, int B, int T, int H, int dh) {
    size_t n = (size_t)B * T * H * dh, i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    int e = i % dh, h = (i / dh) % H, t = (i / dh / H) % T, b = i / dh / H / T;
    y[i] = o[(((size_t)b * H + h) * T + t) * dh + e];
}

__global__ void add(float *x, const float *y, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

__global__ void gelu(float *x, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; x[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
}

static float *alloc(size_t n, bool fill = true) {
    float *p;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    if (fill) {
        std::vector<float> h(n);
        for (size_t i = 0; i < n; i++) h[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.04f;
        CHECK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    return p;
}

static unsigned blocks(size_t n) { return (unsigned)((n + 255) / 256); }

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 6, L = argc > 2 ? atoi(argv[2]) : 12, T = argc > 3 ? atoi(argv[3]) : 512;
    int B = argc > 4 ? atoi(argv[4]) : 8;
    const char *out = argc > 5 ? argv[5] : "bare_gpt2.steps.json";
    const int d = 768, H = 12, dh = d / H, V = 10000;
    void *lib = dlopen("libcublas.so.13", RTLD_NOW);
    if (!lib) { fprintf(stderr, "bare_gpt2: cannot open libcublas.so.13: %s\n", dlerror()); return 2; }
    CreateFn create = (CreateFn)dlsym(lib, "cublasCreate_v2");
    gemm_fn = (GemmFn)dlsym(lib, "cublasSgemm_v2");
    batched_fn = (BatchedFn)dlsym(lib, "cublasSgemmStridedBatched");
    if (!create || !gemm_fn || !batched_fn || create(&handle)) { fprintf(stderr, "bare_gpt2: cuBLAS symbols\n"); return 2; }
    size_t BT = (size_t)B * T;
    std::vector<int> tok(BT);
    for (auto &t : tok) t = rand() % V;
    int *tokens;
    CHECK(cudaMalloc(&tokens, BT * sizeof(int)));
    CHECK(cudaMemcpy(tokens, tok.data(), BT * sizeof(int), cudaMemcpyHostToDevice));
    float *wte = alloc((size_t)V * d), *wpe = alloc((size_t)T * d), *lm = alloc((size_t)d * V);
    std::vector<float *> wqkv(L), wo(L), wfc(L), wfc2(L);
    for (int l = 0; l < L; l++) {
        wqkv[l] = alloc((size_t)d * 3 * d); wo[l] = alloc((size_t)d * d);
        wfc[l] = alloc((size_t)d * 4 * d); wfc2[l] = alloc((size_t)4 * d * d);
    }
    float *x = alloc(BT * d, false), *h = alloc(BT * d, false), *qkv = alloc(BT * 3 * d, false);
    float *q = alloc(BT * d, false), *k = alloc(BT * d, false), *v = alloc(BT * d, false), *o = alloc(BT * d, false);
    float *att = alloc((size_t)B * H * T * T, false), *y = alloc(BT * d, false), *f = alloc(BT * 4 * d, false);
    float *logits = alloc(BT * V, false);
    const float one = 1.f, zero = 0.f, scale = 1.f / sqrtf((float)dh);
    CHECK(cudaDeviceSynchronize());
    std::vector<double> seconds;
    for (int s = 0; s < steps; s++) {
        auto t0 = std::chrono::steady_clock::now();
        embed<<<blocks(BT * d), 256>>>(tokens, wte, wpe, x, T, d, (int)(BT * d));
        for (int l = 0; l < L; l++) {
            layer_norm<<<(unsigned)BT, 256>>>(x, h, d);
            gemm(h, wqkv[l], qkv, (int)BT, 3 * d, d);
            split_heads<<<blocks(BT * d), 256>>>(qkv, q, k, v, B, T, H, dh);
            batched_fn(handle, OP_T, OP_N, T, T, dh, &one, k, dh, (long long)T * dh, q, dh, (long long)T * dh, &zero,
                       att, T, (long long)T * T, B * H);
            causal_softmax<<<(unsigned)(B * H * T), 256>>>(att, T, scale);
            batched_fn(handle, OP_N, OP_N, dh, T, T, &one, v, dh, (long long)T * dh, att, T, (long long)T * T, &zero,
                       o, dh, (long long)T * dh, B * H);
            merge_heads<<<blocks(BT * d), 256>>>(o, y, B, T, H, dh);
            gemm(y, wo[l], h, (int)BT, d, d);
            add<<<blocks(BT * d), 256>>>(x, h, BT * d);
            layer_norm<<<(unsigned)BT, 256>>>(x, h, d);
            gemm(h, wfc[l], f, (int)BT, 4 * d, d);
            gelu<<<blocks(BT * 4 * d), 256>>>(f, BT * 4 * d);
            gemm(f, wfc2[l], h, (int)BT, d, 4 * d);
            add<<<blocks(BT * d), 256>>>(x, h, BT * d);
        }
        layer_norm<<<(unsigned)BT, 256>>>(x, h, d);
        gemm(h, lm, logits, (int)BT, V, d);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        printf("step_%d: %.3f ms\n", s, seconds.back() * 1e3);
    }
    FILE *fp = fopen(out, "w");
    if (!fp) { perror(out); return 1; }
    fprintf(fp, "{\"config\": {\"program\": \"bare_gpt2\", \"n_layers\": %d, \"d_model\": %d, \"n_heads\": %d, "
                "\"ctx\": %d, \"batch\": %d, \"vocab\": %d, \"mode\": \"forward\", \"nvtx\": false}, \"steps\": [",
            L, d, H, T, B, V);
    for (int s = 0; s < steps; s++)
        fprintf(fp, "%s{\"name\": \"step_%d\", \"seconds\": %.9f}", s ? ", " : "", s, seconds[s]);
    fprintf(fp, "]}\n");
    fclose(fp);
    return 0;
}
