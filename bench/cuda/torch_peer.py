"""PyTorch on the same GPU, for the rows of bench/cuda/kernels.bench.cu and train.bench.cu (run by run-gpu-benchmarks.sh
where python3 has torch). Timed like the C++ side: CUDA events around each iteration after a warm-up,
median of the iterations. Prints one line per case: name, microseconds, GB/s or TFLOP/s."""
import statistics
import sys

import torch


def timed(f, iters=50):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        print("torch_peer.py: no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # full float32 in cuDNN too, as fluxion without allow_tf32
    n = 1 << 24
    g = torch.Generator(device="cuda").manual_seed(7)
    a, b, c, d, e = (torch.rand(n, device="cuda", generator=g) * 2 - 1 for _ in range(5))
    us = timed(lambda: a * b + c * d - torch.sin(e))
    print(f"torch_chain/{n}  {us:10.1f} us  {6 * 4 * n / us / 1e3:8.1f} GB/s")
    us = timed(lambda: a.sum())
    print(f"torch_sum/{n}  {us:10.1f} us  {4 * n / us / 1e3:8.1f} GB/s")
    for m in (1024, 4096):
        x = torch.rand(m, m, device="cuda", generator=g)
        y = torch.rand(m, m, device="cuda", generator=g)
        us = timed(lambda: x @ y)
        print(f"torch_sgemm/{m}  {us:10.1f} us  {2 * m**3 / us / 1e6:8.1f} TFLOP/s")
    conv_rows(g, "")
    depthwise_rows(g)
    for batch in (64, 256):
        us = timed(mlp_step(batch, g))
        print(f"torch_mlp_train/{batch}  {us:10.1f} us")
    for batch in (64, 256):
        us = timed(mlp_step(batch, g, adam=True))
        print(f"torch_mlp_train_adam/{batch}  {us:10.1f} us")
    for name, model, example in (("cnn", cnn, (1, 28, 28)), ("cnn_lstm", CnnLstm, (1, 28, 28)),
                                 ("lstm", LstmOnly, (64, 49))):
        for batch in (64, 256):
            us = timed(model_step(model(), example, batch, g))
            print(f"torch_{name}_train_adam/{batch}  {us:10.1f} us")
    # cuDNN picking its algorithms by timing them (torch.backends.cudnn.benchmark), as fluxion's
    # cuDNN path does on a geometry's first call; the rows above use PyTorch's default heuristics.
    torch.backends.cudnn.benchmark = True
    conv_rows(g, "_benchmark_mode")
    for batch in (64, 256):
        us = timed(model_step(cnn(), (1, 28, 28), batch, g))
        print(f"torch_cnn_train_adam_benchmark_mode/{batch}  {us:10.1f} us")
    torch.backends.cudnn.benchmark = False
    return 0


def conv_rows(g, suffix):
    """The CNN's second convolution, as conv_fluxion (NCHW, cuDNN): forward, and forward with both
    gradients, at batch 64 and 256."""
    for batch in (64, 256):
        x = torch.rand(batch, 32, 14, 14, device="cuda", generator=g).requires_grad_()
        w = torch.rand(64, 32, 5, 5, device="cuda", generator=g).requires_grad_()
        dy = torch.rand(batch, 64, 14, 14, device="cuda", generator=g)
        flops = 2 * batch * 14 * 14 * 64 * 5 * 5 * 32
        with torch.no_grad():
            us = timed(lambda: torch.nn.functional.conv2d(x, w, padding=2))
        print(f"torch_conv_forward{suffix}/{batch}  {us:10.1f} us  {flops / us / 1e6:8.1f} TFLOP/s")
        us = timed(lambda: torch.autograd.grad(torch.nn.functional.conv2d(x, w, padding=2), (x, w), dy))
        print(f"torch_conv_backward{suffix}/{batch}  {us:10.1f} us  {3 * flops / us / 1e6:8.1f} TFLOP/s")


def depthwise_rows(g):
    """kernels.bench.cu's depthwise_fluxion: MobileNet's and ConvNeXt's depthwise layers at batch 32
    (groups = channels, same padding), forward, with the input gradient, with the filter gradient;
    in NCHW (PyTorch's default) and channels_last (fluxion's NHWC)."""
    layers = ((56, 128, 3, 1), (56, 128, 3, 2), (14, 512, 3, 1), (14, 384, 7, 1))
    for layout in ("nchw", "channels_last"):
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        for i, (hw, c, k, stride) in enumerate(layers):
            x = torch.rand(32, c, hw, hw, device="cuda", generator=g).to(memory_format=fmt).requires_grad_()
            w = torch.rand(c, 1, k, k, device="cuda", generator=g).to(memory_format=fmt).requires_grad_()
            out = (hw + stride - 1) // stride
            dy = torch.rand(32, c, out, out, device="cuda", generator=g).to(memory_format=fmt)

            def conv():
                return torch.nn.functional.conv2d(x, w, stride=stride, padding=k // 2, groups=c)

            assert conv().shape == dy.shape
            with torch.no_grad():
                us = timed(conv)
            print(f"torch_depthwise_{layout}/{i}/0  {us:10.1f} us")
            us = timed(lambda: torch.autograd.grad(conv(), (x,), dy))
            print(f"torch_depthwise_{layout}/{i}/1  {us:10.1f} us")
            us = timed(lambda: torch.autograd.grad(conv(), (w,), dy))
            print(f"torch_depthwise_{layout}/{i}/2  {us:10.1f} us")


def cnn():
    """bench/nn.bench.cpp's 2-conv CNN (NCHW, PyTorch's layout)."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, padding=2),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


class CnnLstm(torch.nn.Module):
    """The seed's CNN+LSTM: conv 32 5x5, pool, conv 64 5x5, pool, 64 steps of 49 features, LSTM 128."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, padding=2),
                                      nn.MaxPool2d(2))
        self.lstm = nn.LSTM(49, 128, batch_first=True)
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        f = self.features(x).flatten(2)  # (batch, 64 channels, 49): channels are the time steps
        _, (h, _) = self.lstm(f)
        return self.out(h[0])


class LstmOnly(torch.nn.Module):
    """The CNN+LSTM's recurrent part alone, as train.bench.cu's lstm_train_nn: 64 steps of 49 features,
    LSTM 128, dense 10."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(49, 128, batch_first=True)
        self.out = torch.nn.Linear(128, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.out(h[0])


def model_step(model, example, batch, g):
    """A training step of `model`: cross-entropy on integer labels, Adam 1e-3 (eps 1e-7, foreach)."""
    model = model.cuda()
    x = torch.rand(batch, *example, device="cuda", generator=g)
    labels = torch.arange(batch, device="cuda") % 10
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def mlp_step(batch, g, adam=False):
    """The step of bench/cuda/train.bench.cu: 784-256-256-10, softmax cross-entropy, SGD 0.01 (or
    Adam 1e-3, eps 1e-7 as Keras's and fluxion's default; foreach, PyTorch's default on a GPU)."""
    sizes = (784, 256, 256, 10)
    params = []
    for i in range(3):
        limit = (6.0 / (sizes[i] + sizes[i + 1])) ** 0.5
        params.append(((torch.rand(sizes[i], sizes[i + 1], device="cuda", generator=g) * 2 - 1) * limit).requires_grad_())
        params.append(torch.zeros(sizes[i + 1], device="cuda", requires_grad=True))
    x = torch.rand(batch, 784, device="cuda", generator=g)
    labels = torch.arange(batch, device="cuda") % 7
    opt = torch.optim.Adam(params, lr=1e-3, eps=1e-7) if adam else torch.optim.SGD(params, lr=0.01)

    def step():
        w1, b1, w2, b2, w3, b3 = params
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        loss = torch.nn.functional.cross_entropy(h @ w3 + b3, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


if __name__ == "__main__":
    sys.exit(main())
