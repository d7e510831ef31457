"""A plain-Python interpreter of the coder language, on words: the independent reference of
the JAX interpreter."""

VARS = "abcde"
OPS = "+-*/%"
LIMIT = 9999


class Episode:

  def __init__(self, xs, targets):
    self.xs, self.targets = list(xs), list(targets)
    self.env = {}
    self.done = False
    self.reward = 0.0

  def _operand(self, w):
    if w == "x":
      return list(self.xs)
    if w.isdigit() and len(w) == 1:
      return [int(w)] * len(self.xs)
    if w in VARS:
      return self.env.get(w)  # None: read before set
    raise SyntaxError(w)

  def _parse(self, words):
    if ";" not in words:
      return None
    words = words[:words.index(";") + 1]
    operand = lambda w: w == "x" or w in VARS or (w.isdigit() and len(w) == 1)
    if len(words) == 3 and words[0] == "ret" and operand(words[1]):
      return ("ret", words[1])
    if len(words) in (4, 6) and words[0] in VARS and words[1] == "=" and operand(words[2]):
      if len(words) == 4:
        return ("set", words[0], words[2])
      if words[3] in OPS and operand(words[4]):
        return ("set", words[0], words[2], words[3], words[4])
    return None

  def step(self, words):
    """Returns (observation word, status) with status 1 success / 2 failed / 0 finished."""
    if self.done:
      return "<pad>", 0
    stmt = self._parse(words)
    if stmt is None:
      return "err_syntax", 2
    names = [stmt[1]] if stmt[0] == "ret" else [stmt[2]] + ([stmt[4]] if len(stmt) == 5 else [])
    vals = [self._operand(w) for w in names]
    if any(v is None for v in vals):
      return "err_name", 2
    if stmt[0] == "set" and len(stmt) == 5:
      op, (a, b) = stmt[3], vals
      if op in "/%" and 0 in b:
        return "err_div", 2
      value = [{"+": p + q, "-": p - q, "*": p * q, "/": p // q if q else 0,
                "%": p % q if q else 0}[op] for p, q in zip(a, b)]
    else:
      value = vals[0]
    if any(abs(v) > LIMIT for v in value):
      return "err_range", 2
    if stmt[0] == "ret":
      self.done = True
      ok = value == self.targets
      self.reward = 1.0 if ok else 0.0
      return ("pass" if ok else "fail"), 1
    self.env[stmt[1]] = value
    return "ok", 1
