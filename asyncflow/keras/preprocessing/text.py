"""`tf.keras.preprocessing.text`: word splitting, hashing of words to indices and the
`Tokenizer` vocabulary (Python and numpy, outside the graph), with Keras' JSON form.

`one_hot` hashes with Python's `hash`, which is salted per process unless
PYTHONHASHSEED is set (as in Keras); `hashing_trick(..., hash_function="md5")` is stable.
"""

from __future__ import annotations

import collections
import hashlib
import json

import numpy as np

__all__ = ["text_to_word_sequence", "one_hot", "hashing_trick", "Tokenizer", "tokenizer_from_json"]

_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(input_text, filters=_FILTERS, lower=True, split=" "):
    """The words of `input_text`: lowercased, each `filters` character made a
    separator, split on `split`, empty pieces dropped."""
    if lower:
        input_text = input_text.lower()
    input_text = input_text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in input_text.split(split) if w]


def hashing_trick(
    text, n, hash_function=None, filters=_FILTERS, lower=True, split=" ", analyzer=None
):
    """Each word's hash mod (n - 1), plus 1, so indices are in [1, n) (0 is kept for
    padding); `hash_function` None is Python's `hash`, "md5" the MD5 digest."""
    if hash_function is None:
        hash_function = hash
    elif hash_function == "md5":

        def hash_function(w):
            return int(hashlib.md5(w.encode()).hexdigest(), 16)

    words = (
        text_to_word_sequence(text, filters=filters, lower=lower, split=split)
        if analyzer is None
        else analyzer(text)
    )
    return [hash_function(w) % (n - 1) + 1 for w in words]


def one_hot(input_text, n, filters=_FILTERS, lower=True, split=" ", analyzer=None):
    """`hashing_trick` with Python's `hash`."""
    return hashing_trick(
        input_text,
        n,
        hash_function=hash,
        filters=filters,
        lower=lower,
        split=split,
        analyzer=analyzer,
    )


class Tokenizer:
    """A word (or character) vocabulary ranked by frequency (index 1 the most frequent,
    or `oov_token`), mapping texts to index sequences or count matrices; only indices
    below `num_words` are used when it is set.

    Raises:
      TypeError: an unknown keyword argument.
    """

    def __init__(
        self,
        num_words=None,
        filters=_FILTERS,
        lower=True,
        split=" ",
        char_level=False,
        oov_token=None,
        analyzer=None,
        **kwargs,
    ):
        if "nb_words" in kwargs:
            num_words = kwargs.pop("nb_words")
        document_count = kwargs.pop("document_count", 0)
        if kwargs:
            raise TypeError("Unrecognized keyword arguments: " + str(kwargs))
        self.word_counts = collections.OrderedDict()
        self.word_docs = collections.defaultdict(int)
        self.filters, self.split, self.lower = filters, split, lower
        self.num_words, self.document_count = num_words, document_count
        self.char_level, self.oov_token, self.analyzer = char_level, oov_token, analyzer
        self.index_docs = collections.defaultdict(int)
        self.word_index: dict = {}
        self.index_word: dict = {}

    def _tokens(self, text):
        if self.char_level or isinstance(text, list):
            if self.lower:
                text = [t.lower() for t in text] if isinstance(text, list) else text.lower()
            return text
        if self.analyzer is not None:
            return self.analyzer(text)
        return text_to_word_sequence(
            text, filters=self.filters, lower=self.lower, split=self.split
        )

    def fit_on_texts(self, texts) -> None:
        """Count the words of `texts` (strings, or lists of tokens) and re-rank."""
        for text in texts:
            self.document_count += 1
            seq = self._tokens(text)
            for w in seq:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
            for w in set(seq):
                self.word_docs[w] += 1
        # A stable sort: equal counts keep first-seen order.
        ranked = sorted(self.word_counts.items(), key=lambda kv: kv[1], reverse=True)
        vocab = ([] if self.oov_token is None else [self.oov_token]) + [w for w, _ in ranked]
        self.word_index = {w: i for i, w in enumerate(vocab, start=1)}
        self.index_word = {i: w for w, i in self.word_index.items()}
        for w, c in list(self.word_docs.items()):
            self.index_docs[self.word_index[w]] = c

    def fit_on_sequences(self, sequences) -> None:
        """Count documents per index (for tfidf) from index sequences."""
        self.document_count += len(sequences)
        for seq in sequences:
            for i in set(seq):
                self.index_docs[i] += 1

    def texts_to_sequences_generator(self, texts):
        oov = self.word_index.get(self.oov_token)
        for text in texts:
            out = []
            for w in self._tokens(text):
                i = self.word_index.get(w)
                if i is not None:
                    if self.num_words and i >= self.num_words:
                        if oov is not None:
                            out.append(oov)
                    else:
                        out.append(i)
                elif self.oov_token is not None:
                    out.append(oov)
            yield out

    def texts_to_sequences(self, texts) -> list:
        return list(self.texts_to_sequences_generator(texts))

    def sequences_to_texts_generator(self, sequences):
        oov = self.word_index.get(self.oov_token)
        for seq in sequences:
            words = []
            for num in seq:
                word = self.index_word.get(num)
                if word is not None:
                    if self.num_words and num >= self.num_words:
                        if oov is not None:
                            words.append(self.index_word[oov])
                    else:
                        words.append(word)
                elif self.oov_token is not None:
                    words.append(self.index_word[oov])
            yield " ".join(words)

    def sequences_to_texts(self, sequences) -> list:
        return list(self.sequences_to_texts_generator(sequences))

    def texts_to_matrix(self, texts, mode="binary"):
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences, mode="binary"):
        """A (len(sequences), num_words) float matrix: 'binary', 'count', 'freq' or
        'tfidf' per index.

        Raises:
          ValueError: no num_words and no vocabulary, tfidf before fitting, or an unknown
            mode.
        """
        if self.num_words:
            num_words = self.num_words
        elif self.word_index:
            num_words = len(self.word_index) + 1
        else:
            raise ValueError(
                "Specify a dimension (`num_words` argument), or fit on some text data first."
            )
        if mode == "tfidf" and not self.document_count:
            raise ValueError("Fit the Tokenizer on some data before using tfidf mode.")
        x = np.zeros((len(sequences), num_words))
        for row, seq in enumerate(sequences):
            if not seq:
                continue
            counts = collections.Counter(j for j in seq if j < num_words)
            for j, c in counts.items():
                if mode == "count":
                    x[row][j] = c
                elif mode == "freq":
                    x[row][j] = c / len(seq)
                elif mode == "binary":
                    x[row][j] = 1
                elif mode == "tfidf":
                    idf = np.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
                    x[row][j] = (1 + np.log(c)) * idf
                else:
                    raise ValueError("Unknown vectorization mode:", mode)
        return x

    def get_config(self) -> dict:
        """The settings and the counts (as JSON strings, as Keras writes them)."""
        return {
            "num_words": self.num_words,
            "filters": self.filters,
            "lower": self.lower,
            "split": self.split,
            "char_level": self.char_level,
            "oov_token": self.oov_token,
            "document_count": self.document_count,
            "word_counts": json.dumps(self.word_counts),
            "word_docs": json.dumps(self.word_docs),
            "index_docs": json.dumps(self.index_docs),
            "index_word": json.dumps(self.index_word),
            "word_index": json.dumps(self.word_index),
        }

    def to_json(self, **kwargs) -> str:
        return json.dumps(
            {"class_name": type(self).__name__, "config": self.get_config()}, **kwargs
        )


def tokenizer_from_json(json_string) -> Tokenizer:
    """The Tokenizer `Tokenizer.to_json` wrote."""
    config = dict(json.loads(json_string).get("config"))
    word_counts = json.loads(config.pop("word_counts"))
    word_docs = json.loads(config.pop("word_docs"))
    index_docs = {int(k): v for k, v in json.loads(config.pop("index_docs")).items()}
    index_word = {int(k): v for k, v in json.loads(config.pop("index_word")).items()}
    word_index = json.loads(config.pop("word_index"))
    tokenizer = Tokenizer(**config)
    tokenizer.word_counts, tokenizer.word_docs = word_counts, word_docs
    tokenizer.index_docs, tokenizer.word_index = index_docs, word_index
    tokenizer.index_word = index_word
    return tokenizer
