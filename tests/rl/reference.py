"""Float64 NumPy transcriptions of TRL / verl formulas (loops, one sequence at a time), the
independent references of the rl tests."""

import math

import numpy as np


def group_advantages(rewards, scale="group", eps=1e-6):
  out = np.zeros_like(rewards, dtype=np.float64)
  valid_all = [r for r in rewards.ravel() if np.isfinite(r)]
  batch_std = np.std(valid_all, ddof=1) if len(valid_all) > 1 else 0.0
  for q, row in enumerate(rewards):
    idx = [g for g, r in enumerate(row) if np.isfinite(r)]
    vals = np.array([row[g] for g in idx], np.float64)
    if len(vals) == 1:  # verl: singleton group has mean 0, std 1
      mean, std = 0.0, 1.0
    elif len(vals) > 1:
      mean, std = vals.mean(), vals.std(ddof=1)
    for g in idx:
      a = row[g] - mean
      if scale == "group":
        a /= std + eps
      elif scale == "batch":
        a /= batch_std + eps
      out[q, g] = a
  return out


def rloo_advantages(rewards):
  out = np.zeros_like(rewards, dtype=np.float64)
  for q, row in enumerate(rewards):
    idx = [g for g, r in enumerate(row) if np.isfinite(r)]
    for g in idx:
      others = [row[j] for j in idx if j != g]
      out[q, g] = row[g] - (np.mean(others) if others else 0.0)
  return out


def gvpo_advantages(rewards, status, b=0.2, tol=1e-8):
  q_, g_, t_ = status.shape
  out = np.zeros((q_, g_, t_))
  for q in range(q_):
    idx = [g for g in range(g_) if np.isfinite(rewards[q, g])]
    mean = np.mean([rewards[q, g] for g in idx]) if len(idx) > 1 else 0.0
    for g in idx:
      a = rewards[q, g] - mean
      for t in range(t_):
        if status[q, g, t] == 1:
          out[q, g, t] = a
        elif status[q, g, t] == 2:
          if abs(a) < tol:
            out[q, g, t] = a - b
          elif a < 0:
            out[q, g, t] = (1 + b) * a
  return out


def kl(logp, ref, estimator):
  if estimator == "k1":
    return logp - ref
  if estimator == "k2":
    return 0.5 * (logp - ref) ** 2
  d = min(max(ref - logp, -20.0), 20.0)
  return min(max(math.exp(d) - d - 1.0, -10.0), 10.0)


def policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2, aggregation="token-mean",
                ref=None, kl_coef=0.0, kl_estimator="k3", dual_clip=None,
                importance_level="token"):
  b, t = logp.shape
  adv = np.broadcast_to(adv.reshape(b, -1), (b, t))
  per = np.zeros((b, t))
  clipped = 0.0
  for i in range(b):
    lr = [min(max(logp[i, j] - old[i, j], -20.0), 20.0) for j in range(t)]
    if importance_level == "sequence":
      n = sum(mask[i])
      s = sum(lr[j] * mask[i, j] for j in range(t)) / max(n, 1.0)
      lr = [s] * t
    for j in range(t):
      rho, a = math.exp(lr[j]), adv[i, j]
      l1 = -a * rho
      l2 = -a * min(max(rho, 1 - clip_low), 1 + clip_high)
      loss = max(l1, l2)
      clipped += float(l2 > l1) * mask[i, j]
      if dual_clip is not None and a < 0:
        loss = min(loss, -a * dual_clip)
      if ref is not None:
        loss += kl_coef * kl(logp[i, j], ref[i, j], kl_estimator)
      per[i, j] = loss
  m = mask
  if aggregation == "token-mean":
    value = (per * m).sum() / max(m.sum(), 1.0)
  elif aggregation == "seq-mean-token-mean":
    value = np.mean([(per[i] * m[i]).sum() / max(m[i].sum(), 1.0) for i in range(b)])
  elif aggregation == "seq-mean-token-sum":
    value = np.mean([(per[i] * m[i]).sum() for i in range(b)])
  else:  # dr_grpo
    value = (per * m).sum() / (b * t)
  return value, clipped / max(m.sum(), 1.0)


def logsigmoid(z):
  return -np.logaddexp(0.0, -z)


def dpo(cw, rj, rcw, rrj, beta, ls=0.0):
  z = beta * ((cw - rcw) - (rj - rrj))
  return -(1 - ls) * logsigmoid(z) - ls * logsigmoid(-z)


def robust(cw, rj, rcw, rrj, beta, eps):
  z = beta * ((cw - rcw) - (rj - rrj))
  return (-(1 - eps) * logsigmoid(z) + eps * logsigmoid(-z)) / (1 - 2 * eps)


def ipo(cw, rj, rcw, rrj, beta, lw, ll):
  logits = (cw / lw - rcw / lw) - (rj / ll - rrj / ll)
  return (logits - 1 / (2 * beta)) ** 2


def simpo(cw, rj, lw, ll, beta, gamma):
  logits = cw / lw - rj / ll - gamma / beta
  return -logsigmoid(beta * logits)
