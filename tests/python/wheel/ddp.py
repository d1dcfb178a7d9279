"""ddp - one rank under torchrun, run by tests/python/test_wheel.sh in a
venv the wheel was installed into: torchrun's environment (RANK,
WORLD_SIZE, MASTER_ADDR, ...) for the process group, the job and
bellowsd's endpoints from BELLOWS_JOB, BELLOWS_CONTROL and
BELLOWS_PUBLISH alone. A small model trains 30 steps through
bellows.torch.attach (PowerSGD at the levels bellowsd decides); each rank
prints one JSON line: its rank, the library it loaded, the levels of every
step, its decisions and misses."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

import bellows
import bellows.torch

STEPS = 30

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 4))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
agent = bellows.torch.attach(ddp, optimizer=opt, window_steps=5,
                             decision_timeout_ms=10000)
g = torch.Generator().manual_seed(rank)
levels = []
for _ in range(STEPS):
    agent.step_begin()
    x = torch.randn(8, 16, generator=g)
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    agent.step_end()
    levels.append(list(agent.hook.levels))
stats = agent.agent.stats()
agent.close()
print(json.dumps({"rank": rank, "library": bellows.library_path(),
                  "levels": levels, "decisions": stats.decisions,
                  "misses": stats.decision_misses}), flush=True)
del ddp, opt, agent
dist.destroy_process_group()
