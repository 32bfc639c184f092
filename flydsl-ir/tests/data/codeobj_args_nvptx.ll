; NVPTX kernels for the codeobj PTX tests (sm_90):
; @norm has flydsl's KernargLayout for (x: tensor f32, n: i32, eps: f32, y: tensor f32),
; @mixed has a byval struct (.b8 array parameter), small scalars, static shared memory and
; a .maxntid bound.
target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

%pair = type { i64, i64 }
@sh = internal addrspace(3) global [100 x float] poison, align 16
@sh2 = internal addrspace(3) global [3 x i64] poison, align 8

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()

define void @norm(ptr addrspace(1) noalias readonly %x, i64 %x.len, i32 %n, float %eps,
                  ptr addrspace(1) noalias %y, i64 %y.len) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %in = icmp ult i64 %i, %x.len
  br i1 %in, label %body, label %exit
body:
  %px = getelementptr inbounds float, ptr addrspace(1) %x, i64 %i
  %v = load float, ptr addrspace(1) %px, align 4
  %nf = sitofp i32 %n to float
  %d = fadd float %nf, %eps
  %r = fdiv float %v, %d
  %ok = icmp ult i64 %i, %y.len
  br i1 %ok, label %store, label %exit
store:
  %py = getelementptr inbounds float, ptr addrspace(1) %y, i64 %i
  store float %r, ptr addrspace(1) %py, align 4
  br label %exit
exit:
  ret void
}

define void @mixed(ptr addrspace(1) %a, float %s, i16 %h, ptr byval(%pair) align 8 %p, i8 %b,
                   double %d) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %q = getelementptr float, ptr addrspace(3) @sh, i32 %tid
  store float %s, ptr addrspace(3) %q
  %q2 = getelementptr i64, ptr addrspace(3) @sh2, i32 %tid
  %v = load i64, ptr %p
  store i64 %v, ptr addrspace(3) %q2
  call void @llvm.nvvm.barrier0()
  %r = load float, ptr addrspace(3) @sh
  store float %r, ptr addrspace(1) %a
  ret void
}

!nvvm.annotations = !{!0, !1, !2}
!0 = !{ptr @norm, !"kernel", i32 1}
!1 = !{ptr @mixed, !"kernel", i32 1}
!2 = !{ptr @mixed, !"maxntidx", i32 128}
