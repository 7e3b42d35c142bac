// Hand-written softmax rows (8192 f32 per row, one block of T threads per row, n % 4 == 0):
// the variants of notes/prototypes/softmax/variants.py, chosen with -D flags (see there).
#define T 512
#define M4(a) fmaxf(fmaxf(a.x,a.y),fmaxf(a.z,a.w))
#define E4(a) a.x=expf(a.x-m);a.y=expf(a.y-m);a.z=expf(a.z-m);a.w=expf(a.w-m)
#define S4(a) (a.x+a.y)+(a.z+a.w)
#define L for(int q=t;q<nq;q+=T)
__device__ float W(float v,bool x){for(int o=16;o;o>>=1){float u=__shfl_xor_sync(~0u,v,o);v=x?fmaxf(v,u):v+u;}return v;}
__device__ float B(float v,float*r,bool x){v=W(v,x);if(!(threadIdx.x&31))r[threadIdx.x>>5]=v;__syncthreads();v=W((threadIdx.x&31)<T/32?r[threadIdx.x&31]:(x?-3e38f:0.f),x);__syncthreads();return v;}
extern "C" __global__ void __launch_bounds__(T) sm(const float*__restrict__ X,float*__restrict__ Y,int n){
extern __shared__ float4 s4[];__shared__ float rd[32];
const float4*x=(const float4*)(X+(size_t)blockIdx.x*n);float4*y=(float4*)(Y+(size_t)blockIdx.x*n);
int nq=n>>2,t=threadIdx.x;float m=-3e38f,s=0.f;
#if REGS
float4 v[Q];
#pragma unroll
for(int i=0;i<Q;i++){int q=t+i*T;v[i]=q<nq?x[q]:make_float4(m,m,m,m);}
#pragma unroll
for(int i=0;i<Q;i++)m=fmaxf(m,M4(v[i]));
m=B(m,rd,1);
#pragma unroll
for(int i=0;i<Q;i++){E4(v[i]);s+=S4(v[i]);}
float r=1.f/B(s,rd,0);
#pragma unroll
for(int i=0;i<Q;i++){int q=t+i*T;if(q<nq)y[q]=make_float4(v[i].x*r,v[i].y*r,v[i].z*r,v[i].w*r);}
#else
#if ASYNC
L asm volatile("cp.async.cg.shared.global [%0],[%1],16;"::"r"((unsigned)__cvta_generic_to_shared(s4+q)),"l"(x+q):"memory");
asm volatile("cp.async.wait_all;":::"memory");
#else
#pragma unroll U
L s4[q]=x[q];
#endif
L{float4 a=s4[q];m=fmaxf(m,M4(a));}
m=B(m,rd,1);
L{float4 a=s4[q];E4(a);s+=S4(a);
#if EXP1
s4[q]=a;
#endif
}
s=B(s,rd,0);float r=1.f/s;
L{float4 a=s4[q];
#if EXP1
#elif RCP
E4(a);
#else
E4(a);r=1.f;a.x/=s;a.y/=s;a.z/=s;a.w/=s;
#endif
y[q]=make_float4(a.x*r,a.y*r,a.z*r,a.w*r);}
#endif
}
