; A norm-like kernel whose explicit arguments follow flydsl's KernargLayout for
; (x: tensor f32, n: i32, eps: f32, y: tensor f32 writable), uses 1 KiB of LDS and runs
; with 256-thread workgroups. Written for the codeobj tests (any gfx target).
target triple = "amdgcn-amd-amdhsa"

@tile = internal addrspace(3) global [256 x float] poison, align 16

declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()

define amdgpu_kernel void @norm(ptr addrspace(1) noalias readonly %x, i64 %x.len, i32 %n,
                                float %eps, ptr addrspace(1) noalias %y, i64 %y.len) #0 {
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %i = zext i32 %tid to i64
  %px = getelementptr inbounds float, ptr addrspace(1) %x, i64 %i
  %v = load float, ptr addrspace(1) %px, align 4
  %s = getelementptr inbounds [256 x float], ptr addrspace(3) @tile, i32 0, i32 %tid
  store float %v, ptr addrspace(3) %s, align 4
  call void @llvm.amdgcn.s.barrier()
  %j = xor i32 %tid, 1
  %t = getelementptr inbounds [256 x float], ptr addrspace(3) @tile, i32 0, i32 %j
  %w = load float, ptr addrspace(3) %t, align 4
  %sum = fadd float %v, %w
  %nf = sitofp i32 %n to float
  %d = fadd float %nf, %eps
  %r = fdiv float %sum, %d
  %in = icmp ult i64 %i, %y.len
  br i1 %in, label %store, label %exit
store:
  %py = getelementptr inbounds float, ptr addrspace(1) %y, i64 %i
  store float %r, ptr addrspace(1) %py, align 4
  br label %exit
exit:
  ret void
}

attributes #0 = { "amdgpu-flat-work-group-size"="256,256" }
