"""The translation chapter's pipeline: the aligned corpus, subword vocabularies,
length batches, cached beam search, and attention read as word alignments.

References: the raw files of the wheel read here with csv/json (not through
lib), whole-string BPE encoding, per-sentence decoding, loops over links, the
AER formula of Och and Ney (2003) on hand-counted cases, and attention
recomputed from a layer's own projections.
"""

from __future__ import annotations

import csv
import io
import json
import math
import pathlib
import sys
import zipfile

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib.train.aligned_corpus import (
    ALIGNMENT_MEMBER,
    SOURCE_MEMBER,
    TARGET_MEMBER,
    build_verse_pairs,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

def src_row(verse, k, text):
    return {"id": f"n{verse}{k:03d}", "text": text}


def tgt_row(verse, k, text, skip="", exclude=""):
    return {"id": f"{verse}{k:03d}", "source_verse": verse, "text": text,
            "skip_space_after": skip, "exclude": exclude}


V1, V2 = "40001001", "40001002"
SOURCE = [src_row(V1, 1, "Βίβλος"), src_row(V1, 2, "γενέσεως"), src_row(V2, 1, "Ἀβραὰμ")]
TARGET = [
    tgt_row(V1, 1, "The"), tgt_row(V1, 2, "book", skip="y"), tgt_row(V1, 3, ",", exclude="y"),
    tgt_row(V1, 4, "genealogy", skip="y"), tgt_row(V1, 5, ".", exclude="y"),
    tgt_row(V2, 1, "Abraham"),
]
RECORDS = [
    {"source": [f"n{V1}001"], "target": [f"{V1}001", f"{V1}002"]},
    {"source": [f"n{V1}002"], "target": [f"{V1}004"]},
    {"source": [f"n{V2}001"], "target": [f"{V2}001"]},
]


def test_verse_pairs_are_built_from_the_three_files():
    pairs = build_verse_pairs(SOURCE, TARGET, RECORDS)
    assert [p.verse for p in pairs] == [V1, V2]
    first = pairs[0]
    assert first.source == ("Βίβλος", "γενέσεως")
    assert first.target == ("The", "book", ",", "genealogy", ".")
    assert first.target_text == "The book, genealogy."
    assert first.links == {(0, 0), (0, 1), (1, 3)}  # every source id × every target id
    assert first.aligned_targets == [0, 1, 3]  # punctuation is left out
    assert first.reference == "Matthew 1:1"


def test_a_link_between_two_verses_is_left_out():
    records = RECORDS + [{"source": [f"n{V1}002"], "target": [f"{V2}001"]}]
    pairs = build_verse_pairs(SOURCE, TARGET, records)
    assert pairs[0].links == {(0, 0), (0, 1), (1, 3)}
    assert pairs[1].links == {(0, 0)}


def test_a_link_to_an_unknown_token_is_refused():
    records = RECORDS + [{"source": [f"n{V1}009"], "target": [f"{V1}001"]}]
    with pytest.raises(ValueError, match=r"records: record 3 links the unknown source token 'n40001001009'"):
        build_verse_pairs(SOURCE, TARGET, records)


def test_a_verse_with_an_empty_side_is_refused():
    with pytest.raises(ValueError, match="the source \\(Greek\\) side is empty"):
        lib.VersePair("40001001", (), ("In",), (True,), (False,), frozenset())
    with pytest.raises(ValueError, match="the target \\(English\\) side is empty"):
        lib.VersePair("40001001", ("Ἐν",), (), (), (), frozenset())
    with pytest.raises(ValueError, match="source word 1 is empty"):
        lib.VersePair("40001001", ("Ἐν", " "), ("In",), (True,), (False,), frozenset())
    with pytest.raises(ValueError, match=r"link \(2, 0\) is outside the verse"):
        lib.VersePair("40001001", ("Ἐν",), ("In",), (True,), (False,), frozenset({(2, 0)}))


def fake_wheel(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def tsv(rows, fields):
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_a_small_wheel_is_read_from_the_zip(tmp_path):
    path = tmp_path / "w.whl"
    fake_wheel(path, {
        SOURCE_MEMBER: tsv(SOURCE, ["id", "text"]),
        TARGET_MEMBER: tsv(TARGET, ["id", "source_verse", "text", "skip_space_after", "exclude"]),
        ALIGNMENT_MEMBER: json.dumps({"records": RECORDS}),
    })
    pairs = lib.load_verse_pairs(path, expected_sha256=None)
    assert pairs == build_verse_pairs(SOURCE, TARGET, RECORDS)


def test_a_missing_wheel_names_the_install_step(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"make data.*python -m lib\.course_data alignments"):
        lib.load_verse_pairs(tmp_path / "nothing.whl")


def test_a_corrupt_wheel_is_refused_by_its_checksum(tmp_path):
    path = tmp_path / lib.ALIGNMENT_WHEEL
    path.write_bytes(b"not the wheel")
    with pytest.raises(ValueError, match=r"SHA-256 mismatch.*delete it and in a clone of the course run `make data`"):
        lib.load_verse_pairs(path)


def test_a_wheel_without_the_data_is_refused(tmp_path):
    path = tmp_path / "w.whl"
    fake_wheel(path, {SOURCE_MEMBER: tsv(SOURCE, ["id", "text"])})
    with pytest.raises(ValueError, match=f"has no {TARGET_MEMBER}"):
        lib.load_verse_pairs(path, expected_sha256=None)
    path.write_bytes(b"PK garbage")
    with pytest.raises(ValueError, match="is not a readable zip"):
        lib.load_verse_pairs(path, expected_sha256=None)


@pytest.fixture(scope="module")
def corpus():
    return lib.load_verse_pairs()


def test_the_real_corpus_matches_its_raw_files(corpus):
    """Counted straight from the zip with csv and json, not through lib."""
    with zipfile.ZipFile(lib.alignment_wheel_path()) as z:
        source = list(csv.DictReader(io.StringIO(z.read(SOURCE_MEMBER).decode()), delimiter="\t"))
        target = list(csv.DictReader(io.StringIO(z.read(TARGET_MEMBER).decode()), delimiter="\t"))
        records = json.loads(z.read(ALIGNMENT_MEMBER))["records"]
    verse_of = {r["id"]: r["id"][1:9] for r in source}
    verse_of.update({r["id"]: r["source_verse"] for r in target})
    linked = {verse_of[s] for r in records for s in r["source"]
              if any(verse_of[t] == verse_of[s] for t in r["target"])}
    assert len(corpus) == len(linked)
    assert sum(len(p.source) for p in corpus) == sum(1 for r in source if r["id"][1:9] in linked)
    assert sum(len(p.target) for p in corpus) == sum(1 for r in target if r["source_verse"] in linked)
    n_links = sum(1 for r in records for s in r["source"] for t in r["target"] if verse_of[s] == verse_of[t])
    assert sum(len(p.links) for p in corpus) == n_links  # no link is listed twice in the file
    n_all = sum(len(r["source"]) * len(r["target"]) for r in records)
    assert (n_all, n_all - n_links) == (189_927, 454)  # the figures the chapter states
    assert {p.book for p in corpus} == set(lib.NT_BOOKS.values())


def test_the_split_holds_whole_books_out(corpus):
    split = lib.split_by_book(corpus)
    assert {p.book for p in split.test} == set(lib.TEST_BOOKS)
    assert not {p.book for p in split.train} & set(lib.TEST_BOOKS)
    assert len(split.train) + len(split.test) == len(corpus)
    with pytest.raises(ValueError, match="no verses of 'Enoch'"):
        lib.split_by_book(corpus, ["Enoch"])
    with pytest.raises(TypeError, match="single str"):
        lib.split_by_book(corpus, "James")


# ---------------------------------------------------------------------------
# Subword vocabularies and batches
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vocabs(corpus):
    some = corpus[::7]
    src = lib.train_subword_vocab([p.source_text for p in some], 600)
    tgt = lib.train_subword_vocab([p.target_text for p in some], 600)
    return src, tgt


def test_word_by_word_encoding_equals_encoding_the_running_text(corpus, vocabs):
    src_vocab, tgt_vocab = vocabs
    compared = 0
    for pair, enc in zip(corpus[::97], lib.encode_pairs(corpus[::97], src_vocab, tgt_vocab)):
        assert list(enc.src) == src_vocab.encode(" " + pair.source_text)
        assert tgt_vocab.decode(enc.tgt) == pair.target_text
        # In running text two punctuation tokens with no space between them (".’")
        # form one pre-token; word by word they stay apart. Elsewhere: the same ids.
        glued = any(
            not pair.space_after[j] and not a.isalnum() and not b.isalnum()
            for j, (a, b) in enumerate(zip(pair.target, pair.target[1:]))
        )
        if not glued:
            assert list(enc.tgt) == tgt_vocab.encode(" " + pair.target_text)
            compared += 1
        # word_of numbers the words in order, and each word's pieces decode to the word
        for k, word in enumerate(pair.target):
            pieces = [i for i, w in zip(enc.tgt, enc.tgt_word) if w == k]
            assert tgt_vocab.decode(pieces) == word
    assert compared > 50


def test_nothing_is_unknown_and_foreign_ids_are_refused(vocabs):
    _, tgt_vocab = vocabs
    text = "Hallelujah! הללויה 🙂 Ὡσαννά"
    assert tgt_vocab.decode(tgt_vocab.encode(text)) == text
    with pytest.raises(ValueError, match=r"ids: 99999 is not an id of this vocabulary"):
        tgt_vocab.decode([5, 99999])
    with pytest.raises(ValueError, match="word 1 is empty"):
        tgt_vocab.encode_words(["In", ""])
    with pytest.raises(ValueError, match="empty sentence"):
        tgt_vocab.encode_words([])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.integers(1, 200),
       st.none() | st.integers(1, 9), st.none() | st.integers(0, 5))
def test_length_batches_cover_every_example_once_within_budget(lengths, max_tokens, max_size, seed):
    batches = lib.length_batches(lengths, max_tokens, seed=seed, max_size=max_size)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= max_tokens
        assert max_size is None or len(b) <= max_size
    # sorted by length: no two batches interleave
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in batches)
    assert all(hi <= lo_next for (_, hi), (lo_next, _) in zip(spans, spans[1:]))


def test_length_batches_refuse_bad_input():
    with pytest.raises(ValueError, match="no examples"):
        lib.length_batches([], 10)
    with pytest.raises(ValueError, match="item 1 is 0"):
        lib.length_batches([3, 0], 10)


def test_a_translation_batch_has_the_course_masks():
    examples = [lib.EncodedPair((5, 6, 7), (0, 0, 1), (8, 9), (0, 1)),
                lib.EncodedPair((5,), (0,), (8, 9, 10, 11), (0, 1, 2, 3))]
    batch = lib.make_translation_batch(examples)
    assert batch.src.tolist() == [[5, 6, 7], [5, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0, 0], [1, 8, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0, 0], [8, 9, 10, 11, 2]]
    assert torch.equal(batch.src_mask, lib.padding_mask(batch.src, 0))
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(batch.tgt_mask[0, 0], causal & torch.tensor([1, 1, 1, 0, 0], dtype=torch.bool))
    assert batch.n_tokens == 3 + 5
    with pytest.raises(ValueError, match="item 0 has an empty target"):
        lib.make_translation_batch([lib.EncodedPair((5,), (0,), (), ())])


# ---------------------------------------------------------------------------
# Decoding: cached beam search, the whole split in batches
# ---------------------------------------------------------------------------

def eos_prone_model(seed=0):
    torch.manual_seed(seed)
    model = lib.Transformer(30, 25, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                            output_bias=True).eval()
    with torch.no_grad():
        model.generator.bias[2] = 1.5  # EOS likely enough that beams finish at various lengths
    return model


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_cached_beam_search_equals_uncached(alpha):
    model = eos_prone_model()
    src = torch.randint(3, 30, (6, 9), generator=torch.Generator().manual_seed(1))
    src[2, 5:] = 0
    plain = lib.beam_search(model, src, 4, 15, 1, 2, 0, length_penalty=alpha, return_scores=True)
    cached = lib.beam_search(model, src, 4, 15, 1, 2, 0, length_penalty=alpha, return_scores=True,
                             use_cache=True)
    assert plain.finished.any() and plain.tokens.shape[1] > 2  # the case is not trivial
    assert torch.equal(plain.tokens, cached.tokens)
    assert torch.equal(plain.finished, cached.finished)
    assert torch.allclose(plain.scores, cached.scores, atol=1e-5)


def test_translate_ids_equals_decoding_each_sentence_alone():
    model = eos_prone_model(1)
    g = torch.Generator().manual_seed(2)
    sources = [torch.randint(3, 30, (n,), generator=g).tolist() for n in (4, 9, 2, 7, 7, 3)]
    for beam in (1, 3):
        got = lib.translate_ids(model, sources, beam_size=beam, length_penalty=0.6, extra_len=5,
                                max_tokens=12)
        for source, out in zip(sources, got):
            src = torch.tensor([source])
            if beam == 1:
                ids = lib.greedy_decode(model, src, len(source) + 5, 1, 2, 0)[0].tolist()
            else:
                ids = lib.beam_search(model, src, beam, len(source) + 5, 1, 2, 0,
                                      length_penalty=0.6)[0].tolist()
            want = ids[:ids.index(2)] if 2 in ids else [t for t in ids if t != 0]
            assert out == want


def test_translate_ids_refuses_an_empty_source():
    with pytest.raises(ValueError, match="sources: item 1 is empty"):
        lib.translate_ids(eos_prone_model(), [[4, 5], []])


# ---------------------------------------------------------------------------
# Attention as word alignments
# ---------------------------------------------------------------------------

def test_aer_on_hand_counted_cases():
    sure = {(0, 0), (1, 1), (2, 2)}
    possible = sure | {(2, 1)}
    assert lib.alignment_error_rate(sure, sure) == 0.0
    assert lib.alignment_error_rate({(0, 1)}, sure) == 1.0
    # A = {(0,0), (2,1), (1,2)}: |A∩S| = 1, |A∩P| = 2 -> 1 - 3/6
    assert lib.alignment_error_rate({(0, 0), (2, 1), (1, 2)}, sure, possible) == 0.5
    # P = S: AER = 1 - F1; here precision 1/2, recall 1/3 -> F1 = 0.4
    assert math.isclose(lib.alignment_error_rate({(0, 0), (1, 0)}, sure), 0.6)
    with pytest.raises(ValueError, match="must contain every sure link"):
        lib.alignment_error_rate(sure, sure, {(0, 0)})
    with pytest.raises(ValueError, match="undefined"):
        lib.alignment_error_rate(set(), set())
    with pytest.raises(ValueError, match="pair of indices"):
        lib.alignment_error_rate({(0, -1)}, sure)


def test_corpus_aer_sums_counts_before_dividing():
    verses = [({(0, 0)}, {(0, 0)}), ({(0, 1), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)})]
    counts = lib.AlignmentCounts()
    for predicted, sure in verses:
        counts.add(predicted, sure)
    # by hand: |A| = 4, |S| = 4, hits 2 -> 1 - 4/8
    assert counts.aer == 0.5
    assert counts.precision == 0.5 and counts.recall == 0.5
    averaged = sum(lib.alignment_error_rate(a, s) for a, s in verses) / 2
    assert averaged != counts.aer


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 10_000))
def test_word_attention_equals_loops(n_tgt_words, n_src_words, seed):
    g = torch.Generator().manual_seed(seed)
    t_pieces = torch.randint(1, 4, (n_tgt_words,), generator=g).tolist()
    s_pieces = torch.randint(1, 4, (n_src_words,), generator=g).tolist()
    tgt_word = [k for k, p in enumerate(t_pieces) for _ in range(p)]
    src_word = [k for k, p in enumerate(s_pieces) for _ in range(p)]
    attn = torch.randn(2, len(tgt_word), len(src_word), generator=g, dtype=torch.float64).softmax(-1)
    got = lib.word_attention(attn, tgt_word, src_word)
    for h in range(2):
        for a in range(n_tgt_words):
            rows = [t for t, w in enumerate(tgt_word) if w == a]
            for b in range(n_src_words):
                cols = [s for s, w in enumerate(src_word) if w == b]
                want = sum(float(attn[h, t, s]) for t in rows for s in cols) / len(rows)
                assert math.isclose(float(got[h, a, b]), want, rel_tol=1e-9, abs_tol=1e-12)
    assert torch.allclose(got.sum(-1), torch.ones(2, n_tgt_words, dtype=torch.float64))


def test_word_attention_refuses_mismatched_words():
    with pytest.raises(ValueError, match=r"tgt_word: 2 entries for 3 subwords"):
        lib.word_attention(torch.rand(3, 4), [0, 1], [0, 0, 1, 2])
    with pytest.raises(ValueError, match="src_word must number the words"):
        lib.word_attention(torch.rand(3, 4), [0, 1, 2], [0, 2, 2, 3])


def test_argmax_and_diagonal_links():
    attn = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3], [0.0, 0.1, 0.9]])
    assert lib.argmax_links(attn) == {(1, 0), (0, 1), (2, 2)}
    assert lib.argmax_links(attn, targets=[2]) == {(2, 2)}
    assert lib.diagonal_links(4, 4) == {(k, k) for k in range(4)}
    # 2 source words, 4 target words: centres at 0.25, 0.75, 1.25, 1.75 source positions
    assert lib.diagonal_links(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert lib.diagonal_links(5, 1) == {(2, 0)}
    with pytest.raises(ValueError, match="n_src must be a positive int"):
        lib.diagonal_links(0, 3)


def recomputed_cross_attention(model, run):
    """Call `run()`, and recompute every decoder layer's cross-attention (h, m, n) from
    the inputs that layer received and its own w_q and w_k, not from what lib records.
    (Unpadded sources only: no mask is applied.)"""
    seen = []
    hooks = [layer.cross_attn.register_forward_hook(
        lambda mod, args, out: seen.append((mod, args[0], args[1])))
        for layer in model.decoder_layers]
    try:
        result = run()
    finally:
        for h in hooks:
            h.remove()
    maps = []
    for mod, query, key in seen:
        h, d_k = mod.n_heads, mod.d_k
        q = mod.w_q(query).view(1, -1, h, d_k).transpose(1, 2)
        k = mod.w_k(key).view(1, -1, h, d_k).transpose(1, 2)
        maps.append((q @ k.transpose(-2, -1) / math.sqrt(d_k)).softmax(-1)[0].detach())
    return result, maps


def test_cross_attention_by_layer_recomputes_from_the_projections():
    torch.manual_seed(3)
    model = lib.Transformer(20, 20, d_model=16, n_heads=2, n_layers=3, d_ff=32, dropout=0.1)
    src, tgt = [4, 5, 6, 7, 8], [9, 10, 11]
    (predict, read), maps = recomputed_cross_attention(
        model, lambda: lib.cross_attention_by_layer(model, src, tgt))
    assert model.training  # put back in training mode
    assert predict.shape == read.shape == (3, 2, 3, 5)
    assert len(maps) == 3
    for layer, full in enumerate(maps):  # full: (h, 4, 5), BOS + 3 tokens
        assert torch.allclose(predict[layer], full[:, :-1], atol=1e-6)
        assert torch.allclose(read[layer], full[:, 1:], atol=1e-6)
    with pytest.raises(ValueError, match="non-empty"):
        lib.cross_attention_by_layer(model, [], tgt)


# ---------------------------------------------------------------------------
# The fetch step
# ---------------------------------------------------------------------------

sys.path.insert(0, str(ROOT / "tools"))
import fetch_data  # noqa: E402

sys.path.pop(0)


def test_fetch_refuses_a_wheel_with_the_wrong_checksum(tmp_path):
    wheel = tmp_path / fetch_data.WHEEL_NAME
    wheel.write_bytes(b"corrupt download")
    with pytest.raises(fetch_data.FetchError, match=r"step 'verify download' failed: SHA-256 mismatch"):
        fetch_data.fetch_alignments(tmp_path, wheel=wheel)


def test_fetch_downloads_the_wheel_without_installing_it(tmp_path, monkeypatch):
    calls = []

    def fake_run(command, **kw):
        calls.append(command)
        (tmp_path / fetch_data.WHEEL_NAME).write_bytes(b"wheel")

        class Done:
            returncode, stderr = 0, ""
        return Done()

    monkeypatch.setattr(fetch_data.subprocess, "run", fake_run)
    import hashlib
    path = fetch_data.fetch_alignments(tmp_path, wheel_sha256=hashlib.sha256(b"wheel").hexdigest())
    assert path == tmp_path / fetch_data.WHEEL_NAME
    (command,) = calls
    assert command[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in command and "bible-alignments==0.4.2" in command
    assert command[command.index("--only-binary") + 1] == ":all:"
    fetch_data.fetch_alignments(tmp_path, wheel_sha256=hashlib.sha256(b"wheel").hexdigest())
    assert len(calls) == 1  # cached: not downloaded again


def test_the_pinned_checksums_agree():
    assert fetch_data.WHEEL_SHA256 == lib.train.aligned_corpus.ALIGNMENT_WHEEL_SHA256
    assert fetch_data.WHEEL_NAME == lib.ALIGNMENT_WHEEL


def test_score_attention_alignments_equals_loops_over_recomputed_attention():
    torch.manual_seed(5)
    model = lib.Transformer(40, 40, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    g = torch.Generator().manual_seed(6)
    pairs, encoded = [], []
    for k, (n_src, n_tgt) in enumerate(((3, 4), (5, 3), (2, 6))):
        links = frozenset((int(torch.randint(n_src, (1,), generator=g)), j) for j in range(n_tgt))
        excluded = tuple(j == n_tgt - 1 for j in range(n_tgt))  # the last token is punctuation
        pairs.append(lib.VersePair(f"5000100{k + 1}", ("α",) * n_src, ("w",) * n_tgt,
                                   (True,) * n_tgt, excluded, links))
        src_word = [w for w in range(n_src) for _ in range(1 + w % 2)]
        tgt_word = [w for w in range(n_tgt) for _ in range(1 + (w + 1) % 2)]
        src = torch.randint(3, 40, (len(src_word),), generator=g).tolist()
        tgt = torch.randint(3, 40, (len(tgt_word),), generator=g).tolist()
        encoded.append(lib.EncodedPair(tuple(src), tuple(src_word), tuple(tgt), tuple(tgt_word)))
    for rows, shift in (("predict", 0), ("read", 1)):
        got = lib.score_attention_alignments(model, pairs, encoded, rows=rows)
        hits = {}
        for pair, enc in zip(pairs, encoded):
            model.eval()
            m = len(enc.tgt) + 1
            _, maps = recomputed_cross_attention(model, lambda: model(
                torch.tensor([enc.src]), torch.tensor([[1, *enc.tgt]]),
                tgt_mask=torch.ones(m, m).bool().tril()))
            assert len(maps) == 2
            for layer, attn in enumerate(maps):
                for head in range(2):
                    for j in pair.aligned_targets:
                        pieces = [t for t, w in enumerate(enc.tgt_word) if w == j]
                        score = [sum(float(attn[head, t + shift, s]) for t in pieces
                                     for s, w in enumerate(enc.src_word) if w == i)
                                 for i in range(len(pair.source))]
                        link = (score.index(max(score)), j)
                        key_ = (layer, head)
                        a, hs = hits.get(key_, (0, 0))
                        hits[key_] = (a + 1, hs + (link in pair.links))
        n_sure = sum(len(p.links) for p in pairs)
        for (layer, head), (n_pred, n_hit) in hits.items():
            want = 1 - 2 * n_hit / (n_pred + n_sure)
            assert math.isclose(got.heads[layer][head].aer, want, abs_tol=1e-12)
        assert got.aer().shape == (2, 2)
        assert "diagonal baseline" in got.table()


def test_translation_loss_is_the_mean_nll_per_target_token():
    model = eos_prone_model(2)
    model.train()
    g = torch.Generator().manual_seed(3)
    examples = []
    for n, m in ((3, 4), (6, 2), (2, 5), (4, 4)):
        src = torch.randint(3, 30, (n,), generator=g).tolist()
        tgt = torch.randint(3, 25, (m,), generator=g).tolist()
        examples.append(lib.EncodedPair(tuple(src), tuple(range(n)), tuple(tgt), tuple(range(m))))
    total = count = 0.0
    model.eval()
    with torch.no_grad():
        for ex in examples:  # one example at a time, no padding at all
            m = len(ex.tgt) + 1
            logits = model(torch.tensor([ex.src]), torch.tensor([[1, *ex.tgt]]),
                           tgt_mask=torch.ones(m, m).bool().tril())
            log_p = logits[0].log_softmax(-1)
            for t, token in enumerate([*ex.tgt, 2]):
                total -= float(log_p[t, token])
                count += 1
    model.train()
    got = lib.translation_loss(model, examples, max_tokens=10)
    assert math.isclose(got, total / count, rel_tol=1e-5)
    assert model.training


# ---------------------------------------------------------------------------
# Bad attention, and how sure a difference is (paired bootstrap)
# ---------------------------------------------------------------------------

def test_alignment_helpers_refuse_attention_that_is_not_finite():
    # Before the check, argmax_links linked word 0 to the NaN entry: {(1, 0)}.
    with pytest.raises(ValueError, match="word_attn has 1 entries that are NaN"):
        lib.argmax_links(torch.tensor([[0.2, float("nan"), 0.1]]))
    with pytest.raises(ValueError, match="attn has 1 entries that are NaN or infinite"):
        lib.word_attention(torch.tensor([[0.5, float("inf")]]), [0], [0, 1])
    with pytest.raises(ValueError, match="attn has 2 entries"):
        lib.word_attention(torch.full((2, 1), float("nan")), [0, 1], [0])


def test_links_take_any_integer_type_and_name_a_wrong_one():
    np = pytest.importorskip("numpy")
    sure = {(0, 1), (1, 0)}
    assert lib.alignment_error_rate({(np.int64(0), np.int64(1))}, sure) == 1 - 2 / 3
    assert lib.alignment_error_rate([[1, 0]], sure) == 1 - 2 / 3
    with pytest.raises(TypeError, match=r"link indices must be integers, got \(0\.0, 1\).*float"):
        lib.alignment_error_rate({(0.0, 1)}, sure)
    with pytest.raises(TypeError, match="targets: True is not an integer index"):
        lib.diagonal_links(2, 3, targets=[True])


def test_diagonal_takes_the_floor_at_a_tie():
    # n = 2, m = 5: the centre of word 2 is (2 + 1/2) * 2/5 = 1.0 exactly -> source word 1
    # (rounding (j + 1/2) n/m - 1/2 = 0.5 half-to-even would give 0)
    assert lib.diagonal_links(2, 5) == {(0, 0), (0, 1), (1, 2), (1, 3), (1, 4)}


SYSTEM_REFS = ["the cat sat on the mat .", "a dog ran in the park today .",
               "we went home early", "grace and peace to you from God", "he wept"]
SYSTEM_A = ["the cat sat on a mat .", "a dog ran in the park .", "we went home",
            "grace and peace to you", "jesus wept"]
SYSTEM_B = ["a cat is on the mat", "the dog runs in a park today .", "home we went early",
            "peace to you from God", "he cried"]


@pytest.mark.parametrize("metric", ["BLEU", "CHRF"])
def test_paired_bootstrap_resamples_as_sacrebleu_does(metric):
    sacrebleu = pytest.importorskip("sacrebleu")
    from sacrebleu.significance import PairedTest

    def bootstrap_mean(system, baseline):  # sacrebleu's mean over its own resamples
        test = PairedTest([("baseline", baseline), ("system", system)],
                          {"m": getattr(sacrebleu, metric)()}, [SYSTEM_REFS],
                          test_type="bs", n_samples=300)
        _, results = test()
        return next(v for k, v in results.items() if k != "System")[1].mean

    got = lib.paired_bootstrap(getattr(sacrebleu, metric)(), SYSTEM_A, SYSTEM_B,
                               SYSTEM_REFS, n_samples=300)
    want = bootstrap_mean(SYSTEM_A, SYSTEM_B) - bootstrap_mean(SYSTEM_B, SYSTEM_A)
    assert math.isclose(got.mean, want, abs_tol=1e-3)
    a = getattr(sacrebleu, metric)().corpus_score(SYSTEM_A, [SYSTEM_REFS]).score
    b = getattr(sacrebleu, metric)().corpus_score(SYSTEM_B, [SYSTEM_REFS]).score
    assert math.isclose(got.difference, a - b, abs_tol=1e-9)
    assert got.low <= got.mean <= got.high and got.n_samples == 300


def test_paired_bootstrap_of_a_system_against_itself_is_exactly_zero():
    sacrebleu = pytest.importorskip("sacrebleu")
    same = lib.paired_bootstrap(sacrebleu.BLEU(), SYSTEM_A, list(SYSTEM_A), SYSTEM_REFS)
    assert (same.difference, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert not same.excludes_zero()
    with pytest.raises(ValueError, match="hypotheses_b: 4 outputs for 5 references"):
        lib.paired_bootstrap(sacrebleu.BLEU(), SYSTEM_A, SYSTEM_B[:4], SYSTEM_REFS)
    with pytest.raises(TypeError, match="metric must be a sacrebleu metric"):
        lib.paired_bootstrap(len, SYSTEM_A, SYSTEM_B, SYSTEM_REFS)
    with pytest.raises(TypeError, match="n_samples must be an int"):
        lib.paired_bootstrap(sacrebleu.BLEU(), SYSTEM_A, SYSTEM_B, SYSTEM_REFS, n_samples=1.5)


def test_aer_difference_sums_resampled_verses_before_dividing():
    np = pytest.importorskip("numpy")
    # two readings of three verses: (|A|, |S|, hits), counted by hand
    a = [lib.AlignmentCounts(2, 2, 2, 2), lib.AlignmentCounts(3, 4, 1, 1),
         lib.AlignmentCounts(1, 1, 0, 0)]
    b = [lib.AlignmentCounts(2, 2, 0, 0), lib.AlignmentCounts(3, 4, 2, 2),
         lib.AlignmentCounts(1, 1, 1, 1)]
    got = lib.aer_difference(a, b, n_samples=50, seed=7)
    assert math.isclose(got.difference, (1 - 6 / 13) - (1 - 6 / 13), abs_tol=1e-12)
    idx = np.random.default_rng(7).choice(3, size=(50, 3), replace=True)
    diffs = []
    for row in idx:  # the corpus AER of each resample, summed by plain loops
        pa = sum(a[k].predicted + a[k].sure for k in row)
        pb = sum(b[k].predicted + b[k].sure for k in row)
        diffs.append((1 - 2 * sum(a[k].hits_sure for k in row) / pa)
                     - (1 - 2 * sum(b[k].hits_sure for k in row) / pb))
    assert math.isclose(got.low, float(np.percentile(diffs, 2.5)), abs_tol=1e-12)
    assert math.isclose(got.high, float(np.percentile(diffs, 97.5)), abs_tol=1e-12)
    one = lib.aer_difference(a[:1], b[:1])  # one verse: every resample is that verse
    assert (one.difference, one.low, one.high, one.p_value) == (-1.0, -1.0, -1.0, 0.0)
    assert one.excludes_zero()
    with pytest.raises(ValueError, match="same verses, got 3 and 2"):
        lib.aer_difference(a, b[:2])
    with pytest.raises(TypeError, match="a must be a non-empty list of AlignmentCounts"):
        lib.aer_difference([], b)


def test_per_verse_counts_add_up_to_the_corpus_counts():
    torch.manual_seed(5)
    model = lib.Transformer(40, 40, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    pairs, encoded = [], []
    for k, (n_src, n_tgt) in enumerate(((3, 4), (5, 3), (2, 6))):
        links = frozenset((j % n_src, j) for j in range(n_tgt))
        pairs.append(lib.VersePair(f"5000100{k + 1}", ("α",) * n_src, ("w",) * n_tgt,
                                   (True,) * n_tgt, (False,) * n_tgt, links))
        encoded.append(lib.EncodedPair(tuple(range(3, 3 + n_src)), tuple(range(n_src)),
                                       tuple(range(10, 10 + n_tgt)), tuple(range(n_tgt))))
    got = lib.score_attention_alignments(model, pairs, encoded)
    for which, total in (((1, 0), got.heads[1][0]), ((0, "average"), got.average[0]),
                         ("diagonal", got.diagonal)):
        verses = got.per_verse(which)
        assert len(verses) == 3
        assert sum(c.predicted for c in verses) == total.predicted
        assert sum(c.hits_sure for c in verses) == total.hits_sure
    assert got.per_verse("diagonal")[0].aer == lib.alignment_error_rate(
        lib.diagonal_links(3, 4), pairs[0].links)
    with pytest.raises(ValueError, match="head must be 0-1 or 'average'"):
        got.per_verse((0, 2))


def test_subword_decode_returns_the_sentence_without_outer_whitespace():
    from lib.train.translation import train_subword_vocab

    vocab = train_subword_vocab(["the cat sat on the mat", "a dog ran"] * 20, 270)
    for text in ["  the cat ", "a dog ran", " mat\n", "x", "the  cat"]:
        assert vocab.decode(vocab.encode(text)) == text.strip()  # inner spaces kept
    ids = vocab.encode(" dog") + [vocab.eos_id] + vocab.encode("cat")
    assert vocab.decode([vocab.bos_id, vocab.pad_id, *ids]) == "dog"  # stops at EOS
