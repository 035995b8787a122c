r"""The paper's transport map: a Wasserstein GAN with a transport-cost penalty (Black et al.
2020, §3 and App. C; FlipTest's ``gan/util.py``), reimplemented in torch.

The generator G maps source points to target space and minimises

.. math:: -\,\mathbb E_x\, D(G(x)) + \lambda\, \mathbb E_x\, c(x, G(x)),

the critic D maximises E_y D(y) − E_x D(G(x)) with weights clipped to ±``clip`` (WGAN,
Arjovsky et al. 2017). Networks: Dense(128)-ReLU-Dense(128)-ReLU-Dense(out); RMSprop with
learning rate 5e-5 for both; each "epoch" is ``n_critic`` = 5 critic steps on minibatches of
``batch_size`` = 64 drawn with replacement, then one generator step; 20,000 epochs. The notebooks
use the squared-L1 cost (Σ|x − G(x)|)² with λ = 1e-4. ``residual=True`` uses G(x) = x + MLP(x)
(identity at start), which trains much better in a short budget (``fliptest_ot.md`` §3.5); the
default ``False`` is the paper's plain generator. Runs are seeded (torch and numpy generators of
their own), but adversarial training stays sensitive to the seed: report several seeds.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fairengine.errors import DataContractError
from fairengine.library_threads import small_problem_threads
from fairengine.transport._base import TransportMap


def _mlp(d_in: int, d_out: int, width: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d_in, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, d_out),
    )


class _Generator(nn.Module):
    def __init__(self, d: int, width: int, residual: bool) -> None:
        super().__init__()
        self.net = _mlp(d, d, width)
        self.residual = residual
        if residual:
            last = self.net[-1]
            assert isinstance(last, nn.Linear)  # _mlp ends with a Linear layer
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        return x + out if self.residual else out


class GANMap(TransportMap):
    """WGAN transport map with transport cost (module docstring).

    Parameters
    ----------
    epochs : generator updates. Default 20,000 (the paper; about 200 s on 2 CPU cores).
    n_critic, batch_size, clip, learning_rate : WGAN schedule. Defaults 5, 64, 0.01, 5e-5.
    cost : "sqcityblock" (the notebooks, default) or "sqeuclidean".
    lam : transport-cost weight λ. Default 1e-4 (the notebooks).
    width : hidden width. Default 128.
    residual : generator x + MLP(x). Default False (the paper).
    device : "cpu" (default) or "cuda".
    random_state : seed. Default 0.
    standardize, min_samples, constant_features : as in every map (:meth:`TransportMap.fit`).

    Attributes: ``generator_`` (torch module, standardized units), ``history_`` (critic
    Wasserstein estimate and mean transport cost every 500 epochs), ``seconds_``.
    """

    def __init__(
        self,
        epochs: int = 20_000,
        *,
        n_critic: int = 5,
        batch_size: int = 64,
        clip: float = 0.01,
        learning_rate: float = 5e-5,
        cost: str = "sqcityblock",
        lam: float = 1e-4,
        width: int = 128,
        residual: bool = False,
        device: str = "cpu",
        random_state: int = 0,
        standardize: bool = True,
        min_samples: int = 10,
        constant_features: str = "raise",
    ) -> None:
        self.epochs = epochs
        self.n_critic = n_critic
        self.batch_size = batch_size
        self.clip = clip
        self.learning_rate = learning_rate
        self.cost = cost
        self.lam = lam
        self.width = width
        self.residual = residual
        self.device = device
        self.random_state = random_state
        self.standardize = standardize
        self.min_samples = min_samples
        self.constant_features = constant_features

    def _fit(self, zs: np.ndarray, zt: np.ndarray) -> None:
        # small MLPs: one thread is fastest (a thread pool on busy cores is 10x slower)
        with small_problem_threads(0.0):
            self._train(zs, zt)

    def _train(self, zs: np.ndarray, zt: np.ndarray) -> None:
        import time

        if self.cost not in ("sqcityblock", "sqeuclidean"):
            raise DataContractError(
                f"cost must be 'sqcityblock' or 'sqeuclidean', got {self.cost!r}"
            )
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            raise DataContractError(f"epochs must be a positive integer, got {self.epochs!r}")
        start = time.perf_counter()
        dev = torch.device(self.device)
        gen = torch.Generator(device="cpu").manual_seed(int(self.random_state))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.random_state))
            g_net = _Generator(zs.shape[1], self.width, self.residual).to(dev)
            d_net = _mlp(zs.shape[1], 1, self.width).to(dev)
        xs = torch.as_tensor(zs, dtype=torch.float32, device=dev)
        xt = torch.as_tensor(zt, dtype=torch.float32, device=dev)
        opt_g = torch.optim.RMSprop(g_net.parameters(), lr=self.learning_rate)
        opt_d = torch.optim.RMSprop(d_net.parameters(), lr=self.learning_rate)
        bs, k = self.batch_size, self.n_critic

        def transport(x: torch.Tensor, gx: torch.Tensor) -> torch.Tensor:
            diff = gx - x
            if self.cost == "sqcityblock":
                return diff.abs().sum(1).pow(2).mean()
            return diff.pow(2).sum(1).mean()

        history = []
        for epoch in range(self.epochs):
            # critic: k steps, each on a fresh real and a fresh generated minibatch
            it = torch.randint(0, len(xt), (k, bs), generator=gen).to(dev)
            is_ = torch.randint(0, len(xs), (k, bs), generator=gen).to(dev)
            for step in range(k):
                with torch.no_grad():
                    fake = g_net(xs[is_[step]])
                loss_d = d_net(fake).mean() - d_net(xt[it[step]]).mean()
                opt_d.zero_grad(set_to_none=True)
                loss_d.backward()
                opt_d.step()
                with torch.no_grad():
                    for p in d_net.parameters():
                        p.clamp_(-self.clip, self.clip)
            xb = xs[torch.randint(0, len(xs), (bs,), generator=gen).to(dev)]
            gx = g_net(xb)
            tc = transport(xb, gx)
            loss_g = -d_net(gx).mean() + self.lam * tc
            opt_g.zero_grad(set_to_none=True)
            loss_g.backward()
            opt_g.step()
            if epoch % 500 == 0 or epoch == self.epochs - 1:
                history.append(
                    {
                        "epoch": epoch,
                        "critic_w": float(-loss_d.detach()),
                        "transport_cost": float(tc.detach()),
                    }
                )
        self.generator_ = g_net.eval()
        self.history_ = history
        self.seconds_ = time.perf_counter() - start

    # ------------------------------------------------------------------ persistence
    def _state_skip(self) -> tuple[str, ...]:
        return ("generator_",)

    def _state_arrays(self) -> dict[str, np.ndarray]:
        """The generator's ``state_dict`` (float32 tensors as arrays, ``generator_.<name>``)."""
        return {
            f"generator_.{k}": v.detach().cpu().numpy()
            for k, v in self.generator_.state_dict().items()
        }

    def _restore_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        prefix = "generator_."
        state = {k[len(prefix) :]: torch.from_numpy(v) for k, v in arrays.items()}
        if not state or len(state) != len(arrays) or not all(k.startswith(prefix) for k in arrays):
            raise DataContractError(
                f"GANMap state must hold the generator's weights ({prefix}*), got "
                f"{sorted(arrays)[:5]}"
            )
        g_net = _Generator(int(self.active_.sum()), self.width, self.residual)
        g_net.load_state_dict(state)
        self.generator_ = g_net.to(torch.device(self.device)).eval()

    def _transform(self, z: np.ndarray) -> np.ndarray:
        dev = torch.device(self.device)
        with torch.no_grad():
            out = self.generator_(torch.as_tensor(z, dtype=torch.float32, device=dev))
        return out.double().cpu().numpy()
