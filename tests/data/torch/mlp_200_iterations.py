# A DataLoader loop of 200 iterations: a 2-layer MLP (2 Linear layers: 2 addmm per forward),
# a cross-entropy loss module, SGD. Used by the --deep and overhead budget tests
# (tests/e2e/instrument_test.cpp, tests/browser/sampled_sections_test.mjs).
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
data = torch.utils.data.TensorDataset(torch.randn(1600, 16), torch.randint(0, 4, (1600,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
lossf = torch.nn.CrossEntropyLoss()
for x, y in loader:
    opt.zero_grad()
    lossf(model(x), y).backward()
    opt.step()
