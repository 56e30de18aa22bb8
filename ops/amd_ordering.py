"""Approximate minimum degree ordering, as TF's SparseMatrixOrderingAMD computes it.

TF hands each matrix to Eigen's `AMDOrdering`, which runs Tim Davis's approximate
minimum degree algorithm (CSparse's `cs_amd`) on the symmetric pattern of A's lower
triangle, diagonal kept (entries above the diagonal are not read: TF orders A as a
self-adjoint matrix; recorded on non-symmetric patterns).  The ordering is only TF's
if every choice is made the same way (which node of minimum degree goes first, the
hash buckets that find supernodes, aggressive absorption, the dense-row threshold, the
postorder of the assembly tree), so this is that algorithm step for step, over Python
lists, in its quotient-graph formulation:

- nodes are the matrix's rows; an eliminated node becomes an *element*; a node's list
  in `ci` (from `cp[i]`, `length[i]` entries) holds first its `elen[i]` elements, then
  the nodes it is still adjacent to;
- `nv[i]` is the number of rows a supervariable i stands for (0: absorbed into another,
  negated while i is in the new element being built);
- degree lists (`head`/`nxt`/`last`) are doubly linked, newest first; `w` holds the
  marks of the set-difference and supernode scans;
- a node with only its diagonal is eliminated at once; a node without a diagonal, or
  whose degree passes `max(16, 10 sqrt(n))` (at most n - 2), is "dense" and ordered last.

Invariant: the result is a permutation of range(n), `perm[k]` the row eliminated k-th.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["amd_order", "symmetric_pattern"]


def _flip(i: int) -> int:
    return -i - 2


def symmetric_pattern(n: int, rows: np.ndarray, cols: np.ndarray) -> tuple[list, list]:
    """Column pointers and sorted row indices of the symmetric pattern of the lower
    triangle of A (diagonal kept)."""
    lower = rows >= cols
    rows, cols = rows[lower], cols[lower]
    r = np.concatenate([rows, cols]).astype(np.int64)
    c = np.concatenate([cols, rows]).astype(np.int64)
    keys = np.unique(c * n + r)
    col, row = np.divmod(keys, n)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=n), out=ptr[1:])
    return ptr.tolist(), row.tolist()


def _clear_marks(mark: int, lemax: int, w: list, n: int) -> int:
    if mark < 2 or mark + lemax < 0:
        for k in range(n):
            if w[k] != 0:
                w[k] = 1
        mark = 2
    return mark


def _postorder(root: int, k: int, head: list, nxt: list, post: list, stack: list) -> int:
    """Depth-first postorder of the tree under `root`, children youngest first."""
    top = 0
    stack[0] = root
    while top >= 0:
        p = stack[top]
        i = head[p]
        if i == -1:
            top -= 1
            post[k] = p
            k += 1
        else:
            head[p] = nxt[i]
            top += 1
            stack[top] = i
    return k


class _Graph:
    """The quotient graph and the algorithm's work arrays (see the module note)."""

    def __init__(self, n: int, ptr: list, idx: list):
        self.n = n
        dense = max(16, int(10 * math.sqrt(n)))
        self.dense = min(n - 2, dense)
        self.cnz = len(idx)
        self.nzmax = self.cnz + self.cnz // 5 + 2 * n  # (elbow room, as the reference)
        self.ci = idx + [0] * (self.nzmax - self.cnz)
        self.cp = ptr[:n] + [0]
        self.length = [ptr[k + 1] - ptr[k] for k in range(n)] + [0]
        self.nv = [1] * (n + 1)
        self.nxt = [-1] * (n + 1)
        self.head = [-1] * (n + 1)
        self.elen = [0] * (n + 1)
        self.degree = list(self.length)
        self.w = [1] * (n + 1)
        self.hhead = [-1] * (n + 1)
        self.last = [-1] * (n + 1)
        self.nel = 0
        self.mindeg = 0
        self.lemax = 0
        self.mark = _clear_marks(0, 0, self.w, n)

    def init_degree_lists(self, ptr: list, idx: list) -> None:
        n = self.n
        for i in range(n):
            has_diag = i in idx[ptr[i] : ptr[i + 1]]
            d = self.degree[i]
            if d == 1 and has_diag:  # only its diagonal: eliminated at once
                self.elen[i] = -2
                self.nel += 1
                self.cp[i] = -1
                self.w[i] = 0
            elif d > self.dense or not has_diag:  # dense: absorbed into the element n
                self.nv[i] = 0
                self.elen[i] = -1
                self.nel += 1
                self.cp[i] = _flip(n)
                self.nv[n] += 1
            else:
                self._push(i, d)
        self.elen[n] = -2
        self.cp[n] = -1
        self.w[n] = 0

    def _push(self, i: int, d: int) -> None:
        head = self.head
        if head[d] != -1:
            self.last[head[d]] = i
        self.nxt[i] = head[d]
        head[d] = i

    def _collect_garbage(self) -> None:
        cp, ci, length = self.cp, self.ci, self.length
        for j in range(self.n):
            p = cp[j]
            if p >= 0:  # live: its first entry is kept in cp, its place marks the owner
                cp[j] = ci[p]
                ci[p] = _flip(j)
        q = p = 0
        while p < self.cnz:
            j = _flip(ci[p])
            p += 1
            if j >= 0:
                ci[q] = cp[j]
                cp[j] = q
                q += 1
                for _ in range(length[j] - 1):
                    ci[q] = ci[p]
                    q += 1
                    p += 1
        self.cnz = q

    def eliminate(self) -> None:
        """One pivot: the node of least approximate degree becomes an element."""
        head, nxt, last, nv = self.head, self.nxt, self.last, self.nv
        k = -1
        while self.mindeg < self.n:
            k = head[self.mindeg]
            if k != -1:
                break
            self.mindeg += 1
        if nxt[k] != -1:
            last[nxt[k]] = -1
        head[self.mindeg] = nxt[k]
        elenk, nvk = self.elen[k], nv[k]
        self.nel += nvk
        if elenk > 0 and self.cnz + self.mindeg >= self.nzmax:
            self._collect_garbage()
        pk1, pk2, dk = self._new_element(k, elenk, nvk)
        self._set_differences(pk1, pk2)
        dk, nvk = self._update_degrees(k, pk1, pk2, dk, nvk)
        self.degree[k] = dk
        self.lemax = max(self.lemax, dk)
        self.mark = _clear_marks(self.mark + self.lemax, self.lemax, self.w, self.n)
        self._detect_supernodes(pk1, pk2)
        self._finalize(k, elenk, nvk, pk1, pk2, dk)

    def _new_element(self, k: int, elenk: int, nvk: int) -> tuple[int, int, int]:
        ci, cp, nv, length = self.ci, self.cp, self.nv, self.length
        nxt, last, head, degree = self.nxt, self.last, self.head, self.degree
        dk = 0
        nv[k] = -nvk
        p = cp[k]
        pk1 = p if elenk == 0 else self.cnz
        pk2 = pk1
        for k1 in range(1, elenk + 2):
            if k1 > elenk:  # the nodes of k itself
                e, pj, ln = k, p, length[k] - elenk
            else:  # the nodes of the element e next in k's list
                e = ci[p]
                p += 1
                pj, ln = cp[e], length[e]
            for _ in range(ln):
                i = ci[pj]
                pj += 1
                nvi = nv[i]
                if nvi <= 0:
                    continue
                dk += nvi
                nv[i] = -nvi
                ci[pk2] = i
                pk2 += 1
                if nxt[i] != -1:
                    last[nxt[i]] = last[i]
                if last[i] != -1:
                    nxt[last[i]] = nxt[i]
                else:
                    head[degree[i]] = nxt[i]
            if e != k:
                cp[e] = _flip(k)
                self.w[e] = 0
        if elenk != 0:
            self.cnz = pk2
        degree[k] = dk
        cp[k] = pk1
        length[k] = pk2 - pk1
        self.elen[k] = -2
        return pk1, pk2, dk

    def _set_differences(self, pk1: int, pk2: int) -> None:
        ci, cp, w, elen, nv, degree = self.ci, self.cp, self.w, self.elen, self.nv, self.degree
        self.mark = mark = _clear_marks(self.mark, self.lemax, w, self.n)
        for pk in range(pk1, pk2):
            i = ci[pk]
            eln = elen[i]
            if eln <= 0:
                continue
            nvi = -nv[i]
            wnvi = mark - nvi
            for p in range(cp[i], cp[i] + eln):
                e = ci[p]
                if w[e] >= mark:
                    w[e] -= nvi
                elif w[e] != 0:
                    w[e] = degree[e] + wnvi

    def _update_degrees(self, k, pk1, pk2, dk, nvk) -> tuple[int, int]:
        ci, cp, w, elen, nv, degree = self.ci, self.cp, self.w, self.elen, self.nv, self.degree
        length, nxt, last, hhead, mark, n = (
            self.length, self.nxt, self.last, self.hhead, self.mark, self.n
        )  # fmt: skip
        for pk in range(pk1, pk2):
            i = ci[pk]
            p1 = cp[i]
            p2 = p1 + elen[i] - 1
            pn = p1
            h = d = 0
            for p in range(p1, p2 + 1):
                e = ci[p]
                if w[e] != 0:
                    dext = w[e] - mark
                    if dext > 0:
                        d += dext
                        ci[pn] = e
                        pn += 1
                        h += e
                    else:  # aggressive absorption of e into k
                        cp[e] = _flip(k)
                        w[e] = 0
            elen[i] = pn - p1 + 1
            p3 = pn
            for p in range(p2 + 1, p1 + length[i]):
                j = ci[p]
                nvj = nv[j]
                if nvj <= 0:
                    continue
                d += nvj
                ci[pn] = j
                pn += 1
                h += j
            if d == 0:  # mass elimination: i goes with k
                cp[i] = _flip(k)
                nvi = -nv[i]
                dk -= nvi
                nvk += nvi
                self.nel += nvi
                nv[i] = 0
                elen[i] = -1
            else:
                degree[i] = min(degree[i], d)
                ci[pn] = ci[p3]
                ci[p3] = ci[p1]
                ci[p1] = k
                length[i] = pn - p1 + 1
                h %= n
                nxt[i] = hhead[h]
                hhead[h] = i
                last[i] = h
        return dk, nvk

    def _detect_supernodes(self, pk1: int, pk2: int) -> None:
        ci, cp, w, elen, nv, length = self.ci, self.cp, self.w, self.elen, self.nv, self.length
        nxt, hhead = self.nxt, self.hhead
        for pk in range(pk1, pk2):
            i = ci[pk]
            if nv[i] >= 0:
                continue
            h = self.last[i]
            i = hhead[h]
            hhead[h] = -1
            while i != -1 and nxt[i] != -1:
                ln, eln = length[i], elen[i]
                mark = self.mark
                for p in range(cp[i] + 1, cp[i] + ln):
                    w[ci[p]] = mark
                jlast = i
                j = nxt[i]
                while j != -1:
                    ok = length[j] == ln and elen[j] == eln
                    p = cp[j] + 1
                    while ok and p <= cp[j] + ln - 1:
                        if w[ci[p]] != mark:
                            ok = False
                        p += 1
                    if ok:  # j is indistinguishable from i: absorbed into it
                        cp[j] = _flip(i)
                        nv[i] += nv[j]
                        nv[j] = 0
                        elen[j] = -1
                        j = nxt[j]
                        nxt[jlast] = j
                    else:
                        jlast = j
                        j = nxt[j]
                i = nxt[i]
                self.mark += 1

    def _finalize(self, k, elenk, nvk, pk1, pk2, dk) -> None:
        ci, nv, degree, n = self.ci, self.nv, self.degree, self.n
        p = pk1
        for pk in range(pk1, pk2):
            i = ci[pk]
            nvi = -nv[i]
            if nvi <= 0:
                continue
            nv[i] = nvi
            d = min(degree[i] + dk - nvi, n - self.nel - nvi)
            self._push(i, d)
            self.last[i] = -1
            self.mindeg = min(self.mindeg, d)
            degree[i] = d
            ci[p] = i
            p += 1
        nv[k] = nvk
        self.length[k] = p - pk1
        if self.length[k] == 0:  # k is a root of the assembly tree
            self.cp[k] = -1
            self.w[k] = 0
        if elenk != 0:
            self.cnz = p

    def postorder(self) -> list:
        n, cp, nv, head, nxt = self.n, self.cp, self.nv, self.head, self.nxt
        for i in range(n):
            cp[i] = _flip(cp[i])
        for j in range(n + 1):
            head[j] = -1
        for j in range(n, -1, -1):  # nodes into their parent's list
            if nv[j] > 0:
                continue
            nxt[j] = head[cp[j]]
            head[cp[j]] = j
        for e in range(n, -1, -1):  # then elements
            if nv[e] <= 0 or cp[e] == -1:
                continue
            nxt[e] = head[cp[e]]
            head[cp[e]] = e
        post = [0] * (n + 1)
        k = 0
        for i in range(n + 1):
            if cp[i] == -1:
                k = _postorder(i, k, head, nxt, post, self.w)
        return post[:n]


def amd_order(n: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """TF's AMD ordering (int32 [n]) of an n x n matrix with entries at (rows, cols)."""
    if n == 0:
        return np.zeros(0, np.int32)
    ptr, idx = symmetric_pattern(n, rows, cols)
    g = _Graph(n, ptr, idx)
    g.init_degree_lists(ptr, idx)
    while g.nel < n:
        g.eliminate()
    return np.asarray(g.postorder(), np.int32)
