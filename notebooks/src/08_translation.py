# ---
# jupyter:
#   accelerator: GPU
# ---

# %% [markdown]
# # 08 · Translating real sentences: German to English
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 8 of 10 · previous: [07 · A GPT on Shakespeare](07_gpt.ipynb) ·
# next: [09 · The bug lab](09_bug_lab.ipynb)
#
# The Transformer of *Attention Is All You Need* is a translator. Chapter 06 trained it on a synthetic task;
# here it translates real sentences. The corpus is **Multi30k** (Elliott et al., 2016): 31,014 descriptions
# of photographs, each written in English and translated into German by professional translators. The model is
# the course's own `Transformer`, with the paper's tokenizer family (byte-pair encoding), its weight sharing,
# beam search with a length penalty, and the field's standard metric, BLEU, computed by sacreBLEU.
#
# **You will learn**
# - byte-pair encoding from scratch: how merges are learned, what they look like, how text is encoded with them,
#   and that the course's version learns exactly the merges of the Hugging Face `tokenizers` library;
# - the paper's weight sharing (section 3.4): one matrix embeds both languages and projects back to words;
# - greedy decoding's blind spot and beam search, batched, with a length penalty, and incremental decoding;
# - what BLEU measures, how sacreBLEU's signature makes scores comparable, and BLEU by beam size and sentence length;
# - to read word alignments from cross-attention.
#
# **Prerequisites:** chapters 01–07 (chapter 06 above all). **Time:** about 75 minutes. On a CPU this notebook
# trains a small translator for well under a minute, then evaluates the one shipped with `course_utils`, which
# its recipe trained for 72 minutes (evaluations aside) on a CPU.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import itertools
import math
import os
import time
from collections import Counter
from dataclasses import asdict

import matplotlib.pyplot as plt
import torch
from IPython.display import display
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from course_utils import (
    MULTI30K_QUICK,
    MULTI30K_TRANSLATOR,
    BPETokenizer,
    Transformer,
    attention_chart,
    attention_grid,
    beam_search,
    bleu,
    bleu_difference,
    checkpoint_path,
    count_parameters,
    evaluation_curve,
    get_device,
    learn_bpe,
    learn_bpe_fast,
    length_penalty,
    load_multi30k,
    load_pretrained,
    merge_pair,
    pad_batch,
    padding_mask,
    pretokenize,
    record_attention,
    seq2seq_loss,
    set_seed,
    target_mask,
    train_translator,
    translate,
)
from course_utils.checks import check_beam_step, check_bpe_segment, check_ngram_matches, check_prediction

set_seed(0)
device = get_device()
# No time? SKIP_TRAINING = True (or COURSE_SKIP_TRAINING=1 in Jupyter's environment) skips the live training run:
# section 5 onwards uses the shipped translator either way.
SKIP_TRAINING = os.environ.get("COURSE_SKIP_TRAINING") == "1"
print(f"PyTorch {torch.__version__}, running on {device}" + (", skipping training" if SKIP_TRAINING else ""))

# %% [markdown]
# ## 1. The data
#
# `load_multi30k(split)` downloads the raw gzip files of Multi30k's task 1 once, from the dataset's own repository
# (`multi30k/dataset` on GitHub), checks their SHA-256 and keeps them in the course's `data/` folder. It returns
# `(German, English)` sentence pairs: 29,000 for training, 1,014 for validation and the 1,000 of the 2016 test
# set, which published results on this corpus report.

# %%
train_pairs, val_pairs, test_pairs = (load_multi30k(split) for split in ("train", "val", "test"))
print(f"train {len(train_pairs):,} pairs, validation {len(val_pairs):,}, test {len(test_pairs):,}: "
      f"{len(train_pairs) + len(val_pairs) + len(test_pairs):,} in all")  # fmt: skip
for de, en in train_pairs[:3]:
    print(f"  DE: {de}\n  EN: {en}")
words = {lang: [len(pair[i].split()) for pair in train_pairs] for i, lang in enumerate(("German", "English"))}
for lang, lengths in words.items():
    print(f"{lang}: {sum(lengths) / len(lengths):.1f} words per sentence on average, at most {max(lengths)}")

# %% [markdown]
# ## 2. Byte-pair encoding
#
# Which tokens should the model read and write? Characters (chapters 06 and 07) make sequences long, and every
# word must be spelled out. Whole words make a vocabulary that never ends: German writes compounds as one word,
# and the test sentences hold words that training never saw. The cell counts both:


# %%
def word_list(pairs):
    return [w for de, en in pairs for w in (*de.split(), *en.split())]


train_words, test_words = Counter(word_list(train_pairs)), word_list(test_pairs)
unseen = [w for w in test_words if w not in train_words]
print(f"{len(train_words):,} different words (split at spaces) in the training sentences of both languages")
print(f"{len(unseen) / len(test_words):.1%} of the test set's words never occur in training, e.g.",
      ", ".join(sorted(set(unseen), key=lambda w: (len(w), w))[-4:]))  # fmt: skip

# %% [markdown]
# **Byte-pair encoding** (BPE; Sennrich et al., 2016, after a 1994 compression method of Philip Gage) sits in between. It starts
# from characters and learns, from the training text, which adjacent symbols to glue together:
#
# 1. cut each sentence into *pieces*: a word (a run of letters and digits) or a single other character, each
#    carrying the space before it as `▁`, so that the pieces join back into the exact text;
# 2. count every piece, and write each as its characters: `▁dog` → `▁ d o g`;
# 3. count every adjacent pair of symbols inside the pieces, each piece weighted by how often it occurs;
# 4. *merge* the most frequent pair everywhere (`o g` → `og`), remember that merge, and go back to 3 until the
#    vocabulary has the size asked for.
#
# Frequent words end up as one symbol; rare words are spelled with a few frequent fragments; and a word is unknown
# only if it holds a character never seen in training (`<unk>`; Multi30k's three splits have none, counted below). `pretokenize` does step 1, `merge_pair` the merge of step 4:

# %%
print(pretokenize("Zwei junge Männer, 3 Hunde."))
print(merge_pair(["▁", "b", "a", "n", "a", "n", "a"], ("a", "n")))

# %% [markdown]
# Here are steps 2 to 4, written out, for the first ten merges of the whole training text (both languages: one
# vocabulary for both, the reason comes in section 3):

# %%
texts = [s for pair in train_pairs for s in pair]  # 58,000 sentences, German and English
counts = Counter(piece for text in texts for piece in pretokenize(text))  # step 2: each piece and its count
splits = {piece: list(piece) for piece in counts}  # each piece as its current symbols
my_merges = []
for _ in range(10):
    pairs = Counter()  # step 3
    for piece, n in counts.items():
        for pair in itertools.pairwise(splits[piece]):
            pairs[pair] += n
    best, n = pairs.most_common(1)[0]
    my_merges.append(best)
    splits = {piece: merge_pair(symbols, best) for piece, symbols in splits.items()}  # step 4
    print(f"merge {len(my_merges):2d}: {best[0]!r:6} + {best[1]!r:6} -> {best[0] + best[1]!r:8} ({n:,} times)")
alphabet = sorted({c for piece in counts for c in piece})
print(f"{len(counts):,} different pieces, {len(alphabet)} different characters")

# %% [markdown]
# The first merges are the commonest letter pairs of the two languages (`in`, `en`, `er`, `ch`) and word starts
# (`▁a`, `▁s`; `▁a` is also the English article, the commonest word of these captions); by the ninth, German's
# `▁ein`.
#
# `course_utils.learn_bpe(texts, vocab_size, min_frequency)` is the same loop with two
# more rules: it stops when the vocabulary (4 special tokens, `<pad>`, `<bos>`, `<eos>` and `<unk>`, then the characters and
# the merged symbols) reaches `vocab_size`, or when no pair occurs `min_frequency` times; and a tie between two pairs
# goes to the one whose first symbol entered the vocabulary first, then its second. Its first ten merges are ours:

# %%
course_bpe = learn_bpe(texts, vocab_size=4 + len(alphabet) + 10)
print(course_bpe, "first merges equal:", course_bpe.merges == my_merges)
assert course_bpe.merges == my_merges

# %% [markdown]
# ### The same merges as a well-kept library
#
# The Hugging Face `tokenizers` library trains BPE in Rust, updating its pair counts incrementally instead of
# recounting. `learn_bpe_fast` sets its trainer up the same way (the same pieces, special tokens and stopping
# rule). On a small corpus, the first 1,000 sentences (500 pairs, German and English), both learn a 300-symbol vocabulary, and the cell
# compares every merge and times both:

# %%
small = texts[:1000]
learn_bpe_fast(small[:20], vocab_size=300)  # a first call loads Hugging Face's library: the race times learning only
start = time.perf_counter()
readable = learn_bpe(small, vocab_size=300)
readable_seconds = time.perf_counter() - start
start = time.perf_counter()
fast = learn_bpe_fast(small, vocab_size=300)
fast_seconds = time.perf_counter() - start
print(f"course_utils.learn_bpe: {len(readable.merges)} merges in {readable_seconds:.2f} s")
print(f"Hugging Face tokenizers: {len(fast.merges)} merges in {fast_seconds:.2f} s")
print("identical merges, in the same order:", readable.merges == fast.merges)
assert readable.merges == fast.merges and readable.itos == fast.itos
assert fast_seconds < readable_seconds / 3

# %% [markdown]
# Identical, merge for merge (the course's tests repeat this for several sizes and minimum counts), and the
# library is far faster (both times printed; at least three times, asserted). So the full vocabulary is learned with `learn_bpe_fast`: 4,000
# entries for both languages from the whole training text, the size `MULTI30K_TRANSLATOR` (the recipe of the
# shipped model, section 5) asks for. The shipped model carries the merges it was trained with; they are the
# ones learned here.

# %%
recipe = MULTI30K_TRANSLATOR
start = time.perf_counter()
tokenizer = learn_bpe_fast(texts, recipe.vocab_size, recipe.min_frequency)
print(f"{tokenizer} learned in {time.perf_counter() - start:.1f} s")
pretrained = load_pretrained("multi30k_translator")
assert tokenizer.merges == BPETokenizer.from_dict(pretrained.tokenizer).merges, "the shipped model's merges"
print("first merges:", " ".join(a + b for a, b in tokenizer.merges[:12]))
print("late merges: ", " ".join(a + b for a, b in tokenizer.merges[3000:3012]))
for sentence in (train_pairs[0][0], train_pairs[0][1], "Ein Fußballspieler schießt aufs Tor."):
    print(f"{len(sentence.split()):2d} words -> {len(tokenizer.encode(sentence)):2d} tokens:",
          " ".join(tokenizer.tokenize(sentence)))  # fmt: skip

# %% [markdown]
# Common words are single tokens in both languages, even the compound `Fußballspieler` (the photographs show a lot
# of sport); rarer words are spelled from pieces: `▁Bü sche`, `▁ma les`. Encoding a word gives the result of replaying
# the merges in the order they were learned (the end-of-chapter exercise writes an encoder),
# and decoding joins the symbols and turns `▁` back into spaces. No sentence may change on the way, so the cell
# encodes and decodes all 62,028 sentences of the three splits:

# %%
all_sentences = [s for pairs in (train_pairs, val_pairs, test_pairs) for pair in pairs for s in pair]
lengths = [len(tokenizer.encode(s)) for s in all_sentences]
assert all(tokenizer.decode(tokenizer.encode(s)) == s for s in all_sentences)
unknown = sum(tokenizer.encode(s).count(tokenizer.unk_id) for s in all_sentences)
print(f"all {len(all_sentences):,} sentences come back exactly; {sum(lengths) / len(lengths):.1f} tokens per "
      f"sentence on average, at most {max(lengths)}; {unknown} unknown tokens (characters never seen in training)")  # fmt: skip

# %% [markdown]
# ## 3. One matrix, three uses
#
# With one vocabulary for both languages, the paper's section 3.4 shares one $V \times d_\text{model}$ matrix
# between the source embedding, the target embedding and the pre-softmax projection (the `generator`); chapter
# 06's exercise tied the last two. `Transformer(..., share_embeddings=True)` ties all three: the same
# `nn.Parameter`, trained by all three uses at once. A word's embedding and the vector that predicts it are
# then the same vector, and a word spelled the same in both languages (a name, a number) is one token with one
# vector. The recipe's sizes, and what sharing saves:

# %%
print(recipe.model)
V = tokenizer.vocab_size
shared = Transformer(V, V, **asdict(recipe.model))
separate = Transformer(V, V, **{**asdict(recipe.model), "share_embeddings": False})
print(f"shared embeddings:   {count_parameters(shared):,} parameters")
print(f"separate embeddings: {count_parameters(separate):,} parameters")
print(f"saved: {count_parameters(separate) - count_parameters(shared):,} = 2 x V x d_model = 2 x {V} x "
      f"{recipe.model.d_model}")  # fmt: skip
assert shared.src_embed.weight is shared.tgt_embed.weight is shared.generator.weight
assert count_parameters(separate) - count_parameters(shared) == 2 * V * recipe.model.d_model

# %% [markdown]
# ## 4. Training, live
#
# `train_translator(recipe, tokenizer, train_pairs, val_pairs)` builds the recipe's model, encodes the pairs
# (the target between `<bos>` and `<eos>`), and runs chapter 02's `train` with chapter 06's loss (`seq2seq_loss`,
# label smoothing 0.1) on batches of similar lengths: sorting sentences by length before cutting batches keeps
# padding short. Every `eval_every` steps it measures the validation loss, and here also translates three
# validation sentences greedily (`on_eval`). It keeps a checkpoint as chapter 07's run does, in `checkpoints/08_translation.ckpt`
# (on Colab, in Google Drive once mounted): a run cut off goes on from its last evaluation when the cell runs again.
#
# The shipped model took 72 minutes; here a small one (`MULTI30K_QUICK`, printed below) trains for 250 steps,
# well under a minute on a CPU, long enough to watch it learn. (The shipped recipe is section 5's; the course has
# not measured how long it takes on a GPU. On a GPU without bfloat16, such as Colab's free T4, `train` computes in
# float16 with a gradient scaler, chapter 02's `amp`, and says so in one line.)

# %% tags=["nbval-ignore-output"]
live = MULTI30K_QUICK  # the same small run on every device: the text below describes it
print(live.model)
print(live.training, f"evaluated every {live.eval_every} steps")
watch = [de for de, _ in val_pairs[:3]]
during = []


def show_translations(model):
    during.append(translate(model, tokenizer, watch))


if not SKIP_TRAINING:
    model, history = train_translator(live, tokenizer, train_pairs, val_pairs[:300], device=device,
                                      on_eval=show_translations, checkpoint=checkpoint_path("08_translation"),
                                      checkpoint_every=live.eval_every, keep={"during": during})  # fmt: skip
    print(f"{live.training.steps} steps in {history.seconds:.0f} s on {device}")

# %% [markdown]
# The validation loss, measured on 300 validation sentences, and the three sentences as the model translated
# them at each evaluation. The first training batch scores a little above $\ln V$, the loss of a uniform guess:
# the shared matrix starts as an embedding, $N(0, 1/d_\text{model})$, which makes the untrained logits of standard
# deviation about 1 rather than near 0 (chapter 06 starts a separate output projection near 0).

# %% tags=["nbval-ignore-output"]
if not SKIP_TRAINING:
    for (step, metrics), outputs in zip(history.evals, during):
        print(f"step {step}: validation loss {metrics['val_loss']:.2f}")
        for output in outputs:
            print("   ", output)
    print("references:")
    for _, en in val_pairs[:3]:
        print("   ", en)
    print(f"first training batch: loss {history.loss[0]:.2f} (ln V = {math.log(V):.2f}: a uniform guess)")
    assert history.evals[-1][1]["val_loss"] < history.loss[0] - 3, "the loss should fall well below ln V"
    display(evaluation_curve(history, title="The live run: training and validation loss"))

# %% [markdown]
# (With training skipped, as in a class, the cell above prints nothing: what follows describes the run saved in the
# complete edition of this notebook, which a student who trains gets a run like.)
#
# From a uniform guess to the shape of a caption in 250 steps. In the run saved here, midway the model writes the captions' commonest
# words and repeats them ("a man in a man in a ..."); by the end most sentences have a subject and a verb
# ("A man in a white shirt is sitting on a street."), though they still repeat and invent. 250 steps do not teach the
# content: compare with the references.
#
# Why does the training loss (grey) lie above the validation loss at both evaluations? Not because the validation
# sentences are easier: the two losses are measured differently. The training loss is the one optimised, with label
# smoothing 0.1 (its target keeps 10% of the probability spread over the whole vocabulary, so even a perfect model
# pays for it) and with dropout on; the validation loss is plain cross-entropy, in eval mode. Section 5 measures
# both ways on the same sentences.
#
# ## 5. The shipped translator
#
# `MULTI30K_TRANSLATOR` is a small model of the size tutorials use for this corpus: 3 encoder and 3 decoder layers
# of 256 dimensions, 8 heads, feed-forward 512, post-norm as in the paper, dropout 0.1. The cell prints its whole
# recipe. Against the paper's base model (6 + 6 layers of 512, $d_\text{ff} = 2048$, a 37,000-token vocabulary,
# batches of about 25,000 tokens, 100,000 steps, the learning rate rising for 4,000 steps then falling as
# $1/\sqrt{\text{step}}$): 29,000 sentence pairs are about 150 times fewer than WMT's 4.5 million, so everything is
# smaller. The vocabulary has 4,000 tokens (section 2's BPE); batches hold 64 pairs; the learning rate peaks at
# $10^{-3}$ after 600 warm-up steps, then falls along a cosine to a tenth of that at
# step 7,000, about 15 passes over the training set; gradients are clipped at norm 1 (chapter 02). `python
# tools/build_checkpoints.py multi30k_translator` trains it (on a CPU) and stores it in half precision. The other
# numbers `describe()` prints are its validation loss and the BLEU scores recorded when it was built, which sections
# 6 and 7 explain; section 7 measures the test scores again. Its training and validation loss during those 72
# minutes of training:

# %%
print(pretrained.describe())
print(pretrained.recipe.model)
print(pretrained.recipe.training)
model = Transformer(V, V, **asdict(pretrained.recipe.model)).to(device)
model.load_state_dict(pretrained.state_dict)
model.eval()
print(f"{count_parameters(model):,} parameters")
assert pretrained.recipe == MULTI30K_TRANSLATOR
display(evaluation_curve(pretrained.history, title="The shipped translator: training and validation loss"))

# The two losses on the same 256 validation sentences: the training loss's way (label smoothing, dropout on) and
# the validation loss's (plain cross-entropy, eval mode)
encoded = [(tokenizer.encode(de), tokenizer.encode(en, bos=True, eos=True)) for de, en in val_pairs[:256]]
src = pad_batch([s for s, _ in encoded], tokenizer.pad_id).to(device)  # (B, S)
tgt = pad_batch([t for _, t in encoded], tokenizer.pad_id).to(device)  # (B, T + 1): <bos> ... <eos>
losses = {}
with torch.no_grad():
    for name, smoothing, train_mode in (("plain, eval mode", 0.0, False), ("label smoothing 0.1, eval mode", 0.1, False),
                                        ("label smoothing 0.1, dropout on", 0.1, True)):  # fmt: skip
        model.train(train_mode)
        torch.manual_seed(0)  # the dropout masks
        losses[name] = seq2seq_loss(model, src, tgt, tokenizer.pad_id, label_smoothing=smoothing).item()
        print(f"validation sentences, {name + ':':33} {losses[name]:.2f}")
model.eval()
assert losses["label smoothing 0.1, eval mode"] > losses["plain, eval mode"] + 0.5

# %% [markdown]
# On the same sentences, label smoothing alone adds about one nat to the loss, and dropout a little more (both
# printed): the curves differ in how they are measured, not in what the model knows.

# %% [markdown]
# ## 6. Greedy decoding and beam search
#
# Chapter 06's greedy decoding writes the most probable next token, again and again. A translation's probability
# is the product of its tokens' probabilities, so its log-probability is a sum,
#
# $$\log p(y \mid x) = \sum_{t=1}^{|y|} \log p(y_t \mid y_{<t}, x),$$
#
# and the best first token need not start the best sentence: a word that is likely now can lead into unlikely
# ones. **Beam search** keeps the $K$ most probable *prefixes* (the beam) instead of one. At each step it extends
# every prefix by every token, $K \times V$ candidates per sentence, each scored by its prefix's log-probability
# plus the new token's; it keeps the best $K$ and goes on, until every kept hypothesis has written `<eos>`.
# $K = 1$ is greedy decoding.
#
# **Your turn.** Write one step, for a batch of $B$ sentences with $K$ hypotheses each. `scores` `(B, K)` holds each
# hypothesis's log-probability so far; `log_probs` `(B*K, V)` the model's next-token log-probabilities, one row per
# hypothesis (row `b*K + k` is sentence `b`'s hypothesis `k`). Return `(new_scores, parent, token)`: the best `K`
# scores of each sentence, best first, `(B, K)`; for each, the row of `log_probs` it extends, `(B*K,)`; and the
# token it adds, `(B*K,)`. Hint: give each row of `log_probs` its hypothesis's score, `scores.reshape(B * K, 1) +
# log_probs` `(B*K, V)`; view each sentence's candidates as one row of $K V$, `(B, K*V)`; take `topk`; and turn each
# position `i` in a row back into a hypothesis of that sentence, `i // V` (row `b*K + i // V` of `log_probs`), and a
# token, `i % V`. Make any new tensor, such as `torch.arange(B)`, where the scores are (`device=scores.device`): the
# checker also runs your function on a stand-in for a GPU. The checker recognises ranking by the new token alone, a `parent` that forgets which sentence it
# is in, swapped indices, and scores added without reshaping.


# %% tags=["exercise"]
def my_beam_step(scores, log_probs):
    """scores (B, K), log_probs (B*K, V) -> new_scores (B, K) best first, parent (B*K,), token (B*K,)."""
    ### BEGIN SOLUTION
    B, K = scores.shape
    V = log_probs.size(-1)
    candidates = (scores.reshape(B * K, 1) + log_probs).view(B, K * V)  # (B, K*V): every hypothesis x every token
    new_scores, index = candidates.topk(K, dim=-1)  # (B, K) each, best first
    offset = torch.arange(B, device=scores.device)[:, None] * K  # (B, 1): sentence b's first row, b*K
    parent = (offset + index // V).view(-1)  # (B*K,): rows of log_probs
    return new_scores, parent, (index % V).view(-1)
    ### END SOLUTION


check_beam_step(my_beam_step)

# %% [markdown]
# `course_utils.beam_search` does this step and three more things (with $K = 1$ it is greedy decoding: chapter 06's
# `greedy_decode` is this function with one beam):
#
# - at the start the $K$ hypotheses of a sentence are the same `<bos>`, so all but one start at $-\infty$: else the
#   first step would keep $K$ copies of the same token;
# - a hypothesis that has written `<eos>` is finished: it stays in the beam, extended only by `<pad>` at no cost,
#   so that it competes with the unfinished ones;
# - the steps keep the hypotheses with the best log-probability; at the end each sentence returns, among its $K$,
#   the one with the best log-probability divided by a **length penalty** (Wu et al., 2016, Google's neural
#   translation system):
#
# $$\mathrm{score}(y) = \frac{\log p(y \mid x)}{\mathrm{lp}(y)}, \qquad \mathrm{lp}(y) = \left(\frac{5 + |y|}{6}\right)^{\alpha}.$$
#
# With $\alpha = 0$ the penalty is 1, and the hypotheses are ranked by their log-probability alone. (Wu et al. also
# compare finished hypotheses by their penalised score *during* the search, and stop early once no live one can
# beat the best finished one; this simpler version prunes by log-probability and applies the penalty only to the
# final choice among the $K$ kept.)
#
# Which $\alpha$? It is chosen on the validation set, never on the test set. When the checkpoint was built,
# `tools/build_checkpoints.py` translated the 1,014 validation sentences greedily and with a beam of 4 for seven
# values of $\alpha$, and kept the best (the beam size, 4, was fixed in advance: the cost of a beam grows with its
# size). It scored each with **BLEU**, which section 7 defines; until then, read it as the share of the
# translation's runs of 1 to 4 words that the reference contains too, lowered when the translations are shorter
# than the references (its *brevity penalty*), on a scale of 0 to 100: higher is better. The checkpoint recorded
# those scores; section 7 measures the test scores again, here.

# %%
BEAM, ALPHA = 4, pretrained.metrics["alpha"]
alphas = sorted(float(k.rsplit("alpha", 1)[1]) for k in pretrained.metrics if k.startswith("val_bleu_beam4_alpha"))
print(f"validation BLEU, greedy: {pretrained.metrics['val_bleu_beam1']:.2f}")
for a in alphas:
    print(f"validation BLEU, beam {BEAM}, alpha {a}: {pretrained.metrics[f'val_bleu_beam4_alpha{a}']:.2f}"
          + ("  <- chosen" if a == ALPHA else ""))  # fmt: skip

# %% [markdown]
# **Predict first.** On 200 test sentences, beam search with $K = 4$ and *no* length penalty ($\alpha = 0$) is
# compared with greedy decoding. Its translations are, on average:
#
# - (a) longer than greedy's: a wider search finds the complete, longer translations greedy cuts short;
# - (b) about as long: the length is set by the source sentence, whatever the search;
# - (c) shorter than greedy's: scored by their summed log-probability, whole hypotheses that end early win.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "c"
### END SOLUTION
check_prediction("beam-without-penalty", my_prediction)  # your answer: "a", "b" or "c"

# %%
sources, references = [de for de, _ in test_pairs], [en for _, en in test_pairs]
few = sources[:200]
greedy_few = translate(model, tokenizer, few)
no_penalty = translate(model, tokenizer, few, beam_size=4, alpha=0.0)


def mean_tokens(sentences):
    return sum(len(tokenizer.encode(s)) for s in sentences) / len(sentences)


for name, outputs in (("greedy", greedy_few), ("beam 4, alpha 0", no_penalty), ("references", references[:200])):
    print(f"{name:>15}: {mean_tokens(outputs):.2f} tokens per sentence")
assert mean_tokens(no_penalty) < mean_tokens(greedy_few) - 0.3

# %% [markdown]
# Measured: without the penalty, beam search finds shorter translations than greedy decoding does. It is
# a better search for the *most probable* sentence, and short sentences are probable: each extra token multiplies
# in another probability below 1. Greedy decoding is protected from this only by its blindness. The length penalty
# offsets that advantage; section 7 prints the lengths, in 13a tokens, of greedy's and the penalised beam's
# translations of the whole test set.
#
# Why did validation pick $\alpha = 2.0$, when the Transformer paper used 0.6 (with beams of 4)? How strongly short
# outputs must be compensated depends on the model (its training, label smoothing, how long its tokens are): a
# value tuned for one model, on its own data, need not suit another. What BLEU punishes is a corpus of
# translations shorter than its references (its brevity penalty; longer ones pay only through their precisions).
# The cell measures it on 300 validation sentences (validation: the test set stays unseen), in sacreBLEU's 13a
# tokens (words and punctuation), as the ratio of the translations' length to the references' and the brevity
# penalty it costs:

# %%
val_sources, val_references = [de for de, _ in val_pairs[:300]], [en for _, en in val_pairs[:300]]
for a in (0.6, ALPHA):
    score = BLEU().corpus_score(translate(model, tokenizer, val_sources, beam_size=BEAM, alpha=a), [val_references])
    print(f"beam {BEAM}, alpha {a}: length ratio {score.sys_len / score.ref_len:.3f}, brevity penalty "
          f"{score.bp:.3f}, BLEU {score.score:.2f}")  # fmt: skip

# %% [markdown]
# With $\alpha = 0.6$ this model's beam still writes translations shorter than the references, and BLEU's brevity
# penalty takes its share; $\alpha = 2.0$ brings the length closer. A different model would want a different
# $\alpha$: that is why it is chosen on validation data, for each model. Between 1.0 and 2.5 the validation scores
# above differ by a few tenths of a point, less than the noise of one evaluation set (section 7 measures that
# noise): what validation shows is that this model wants a large $\alpha$, not that 2.0 is better than 1.5.
#
# ### Incremental decoding
#
# Each step of chapter 06's decoding runs the decoder over the whole prefix again, though only the last position's
# output is new. `Transformer.decode` can instead keep, in each decoder layer, the keys and values of the positions
# already decoded (chapter 07's key/value cache) and the cross-attention's keys and values, computed once from the
# encoder's output: then a step costs one position. Beam search reorders the self-attention caches after each step,
# since a kept hypothesis continues its parent's. Same translations (asserted), in less time (asserted; by how much
# depends on the machine):

# %%
batch = [tokenizer.encode(s) for s in sources[:25]]
src = pad_batch(batch, tokenizer.pad_id).to(device)  # (B, S), padded with <pad>
mask = padding_mask(src, tokenizer.pad_id)  # (B, 1, 1, S)
timings, outputs = {}, {}
for use_cache in (False, True):
    start = time.perf_counter()
    outputs[use_cache] = beam_search(
        model, src, mask, beam_size=4, max_len=src.size(1) + 50, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id,
        pad_id=tokenizer.pad_id, alpha=ALPHA, use_cache=use_cache,
    )  # fmt: skip
    timings[use_cache] = time.perf_counter() - start
print(f"beam 4 on 25 sentences: {timings[False]:.1f} s recomputing every prefix, {timings[True]:.1f} s with caches")
print("the same translations:", torch.equal(outputs[False], outputs[True]))
assert torch.equal(outputs[False], outputs[True]) and timings[True] < timings[False]

# %% [markdown]
# ## 7. BLEU
#
# How good is a translation? **BLEU** (Papineni et al., 2002) compares it with a human reference. For each
# $n$ from 1 to 4 it counts the hypothesis's $n$-grams (runs of $n$ words) that also occur in the reference,
# *clipped*: an $n$-gram counts at most as often as the reference has it, so against the reference "a cat is on the
# mat", the hypothesis "the the the the" earns one match for "the" (the reference has one), not four. Summed over the whole test set, matches divided by the hypothesis's $n$-grams give four
# precisions $p_1 \ldots p_4$. BLEU is their geometric mean times a **brevity penalty** for a corpus of
# translations shorter than its references (length $c$ against $r$), since precision alone rewards saying little:
#
# $$\mathrm{BLEU} = \min\!\left(1, e^{\,1 - r/c}\right) \cdot \exp\Big(\frac{1}{4}\sum_{n=1}^{4} \log p_n\Big),$$
#
# reported $\times 100$. The details (how text is split into words, casing, smoothing) change the score (casing's
# share here is measured at the end of this section), and papers long compared numbers computed differently. **sacreBLEU** (Post, 2018) fixes them: it scores
# detokenised text against the raw references, and prints a **signature** that says exactly how the score was
# computed. The course computes BLEU with it, case-sensitive, on the 1,000 sentences of test 2016, greedy and with
# beam 4 and the $\alpha$ chosen on the validation set:

# %%
start = time.perf_counter()
greedy_out = translate(model, tokenizer, sources)
beam_out = translate(model, tokenizer, sources, beam_size=BEAM, alpha=ALPHA)
seconds = time.perf_counter() - start
greedy_bleu, signature = bleu(greedy_out, references)
beam_bleu, _ = bleu(beam_out, references)
print(f"test 2016, {len(sources):,} sentences, decoded in {seconds:.1f} s on {device}")
print(f"greedy:        BLEU {greedy_bleu:.2f}")
print(f"beam {BEAM}, alpha {ALPHA}: BLEU {beam_bleu:.2f} ({beam_bleu - greedy_bleu:+.2f})")
print("sacreBLEU signature:", signature)
detail = {
    "greedy": BLEU().corpus_score(greedy_out, [references]),
    f"beam {BEAM}": BLEU().corpus_score(beam_out, [references]),
}
for name, score in detail.items():
    print(f"in detail, {name + ':':8}", score)


def mean_precision(score):
    """The geometric mean of p_1 ... p_4: BLEU without its brevity penalty."""
    return math.exp(sum(math.log(p / 100) for p in score.precisions) / 4)


greedy_detail, beam_detail = detail.values()
print(f"geometric mean of p1..p4: greedy {mean_precision(greedy_detail):.4f}, beam {mean_precision(beam_detail):.4f}; "
      f"brevity penalty: greedy {greedy_detail.bp:.3f}, beam {beam_detail.bp:.3f}")  # fmt: skip
assert (
    abs(mean_precision(beam_detail) / mean_precision(greedy_detail) - 1) < 0.005 < beam_detail.bp / greedy_detail.bp - 1
)
recorded = pretrained.metrics
assert abs(greedy_bleu - recorded["bleu_beam1"]) < 0.01 and abs(beam_bleu - recorded[f"bleu_beam{BEAM}"]) < 0.01
gain = bleu_difference(greedy_out, beam_out, references)  # paired bootstrap: 1,000 resamples of the test sentences
print(f"beam {BEAM} minus greedy, paired bootstrap: {gain}")
assert greedy_bleu >= 33 and gain.low > 0, "the beam's gain holds beyond the noise of which sentences were drawn"

# %% [markdown]
# The signature reads: one reference per sentence (`nrefs:1`), case-sensitive (`case:mixed`), no effective order
# (`eff:no`: a sentence too short for 4-grams is not scored on fewer orders; that matters only for single
# sentences), sacreBLEU's standard word splitting (`tok:13a`: punctuation split off the words, as in the WMT
# evaluations), exponential smoothing of zero counts (`smooth:exp`, again for single sentences), and the version.
# Two scores with the same signature were computed the same way.
#
# The detailed lines give the four precisions $p_1 \ldots p_4$ in percent, the brevity penalty (BP), and the
# lengths of the translations and the references in 13a tokens (words and punctuation marks). Where does the beam's
# gain come from? Not from better $n$-grams: the geometric mean of the four precisions is the same for both to
# within 0.5% (asserted; $p_1$ even falls). The beam's translations are longer, closer to the references' length,
# and pay a smaller brevity penalty: $0.982 / 0.962 \approx 1.02$, the whole ratio $40.09 / 39.30 \approx 1.02$ (the precisions even lose a hair). The
# scores are those the checkpoint recorded when it was built (the cell asserts it).
#
# Is the gain more than luck in which sentences the test set happens to hold? The **paired bootstrap** (Koehn, 2004;
# `bleu_difference`) draws 1,000 sentences from the 1,000, with replacement, scores both systems on that same draw,
# and repeats 1,000 times: the middle 95% of the differences is the interval printed. It lies above zero (asserted):
# on this test set the beam's gain is real, and small. (The difference printed is the whole test set's; the interval
# is the middle 95% of the 1,000 resampled differences.)
#
# ### Against published figures
#
# A BLEU score from elsewhere compares with this one only if it measures the same thing: the same test set, the
# same direction, the same casing and tokenisation. Two figures are often quoted for Multi30k:
#
# - The Deep Graph Library's Transformer example reports **35.41** (36.45 with 2 layers). It translates
#   English→German, the other direction, into the language with more word forms; scores tokenised text; and built
#   its vocabulary from the training, validation *and test* sentences. It does not compare with this chapter's
#   figure at all. (The 30.6 that sometimes travels with it is a third party's port of that example.)
# - Ben Trevett's Transformer tutorial (the `pytorch-seq2seq` repository, notebook 6, since moved to its `legacy`
#   folder) reports **36.52** for German→English on this test set, with this chapter's model sizes (3 + 3 layers,
#   $d_\text{model} = 256$, 8 heads, $d_\text{ff} = 512$). But it decodes greedily, lower-cases everything, scores spaCy's word tokens, and has a word
#   vocabulary: each language's words seen at least twice in training, every other word `<unk>`.
#
# The cell scores this chapter's greedy translations in a setting closer to that one (lower-cased; the tokens still
# differ), and measures one thing a word vocabulary costs: it replaces, in the same translations, every word that
# occurs fewer than twice in the English training sentences by `<unk>`, as a word-level model would have to write
# it, and scores again.

# %%
split = Tokenizer13a()  # sacreBLEU's own word splitting, on lower-cased text
en_counts = Counter(w for _, en in train_pairs for w in split(en.lower()).split())
in_vocab = {w for w, n in en_counts.items() if n >= 2}
reference_words = [w for r in references for w in split(r.lower()).split()]
rare = [w for w in reference_words if w not in in_vocab]
unked = [" ".join(w if w in in_vocab else "<unk>" for w in split(t.lower()).split()) for t in greedy_out]
lower_bleu = BLEU(lowercase=True).corpus_score(greedy_out, [references]).score
unk_bleu = (
    BLEU(lowercase=True, tokenize="none", force=True)
    .corpus_score(unked, [[split(r.lower()) for r in references]])
    .score
)
print(f"greedy, cased (as above):                     BLEU {greedy_bleu:.2f}")
print(f"greedy, lower-cased:                          BLEU {lower_bleu:.2f}")
print(f"greedy, lower-cased, rare words as <unk>:     BLEU {unk_bleu:.2f} ({unk_bleu - lower_bleu:+.2f})")
print(f"{len(in_vocab):,} English words seen twice or more; {len(rare) / len(reference_words):.1%} of the "
      f"references' words are not among them")  # fmt: skip
assert lower_bleu > greedy_bleu and unk_bleu < lower_bleu

# %% [markdown]
# Lower-casing alone adds a little: "A" and "a" now match. Rare words cost a word-level model almost nothing here
# (printed): they are 1.8% of the references' words. So this chapter's greedy figure, lower-cased,
# stands a few points above the tutorial's 36.52, and the vocabulary explains little of the gap. The
# two recipes differ in more than that (here: label smoothing, a warm-up and a cosine schedule, about 15 passes over
# the data against 10, one embedding shared by both languages and the output layer); the course has not trained
# the other recipe, so which of these matter is not measured: a gap of a few points between two recipes says only
# that both are in the same range.
#
# Where does beam search help? Below, the three sentences where its translation gains most over greedy's in
# sentence BLEU. For each translation the cell prints the log-probability the model gives it (higher is more
# probable; `sentence_log_prob` scores a translation with teacher forcing, as the loss does) and the score beam
# search picks its final translation by, the log-probability divided by $\mathrm{lp}(y)$ (`length_penalty`):


# %%
@torch.no_grad()
def sentence_log_prob(source, translation):
    """log p(translation | source) under the model: the sum of its tokens' log-probabilities, <eos> included."""
    src = torch.tensor([tokenizer.encode(source)], device=device)  # (1, S)
    tgt = torch.tensor([tokenizer.encode(translation, bos=True, eos=True)], device=device)  # (1, T + 1)
    logits = model(src, tgt[:, :-1], padding_mask(src, tokenizer.pad_id), target_mask(tgt[:, :-1], tokenizer.pad_id))
    return logits.log_softmax(-1).gather(-1, tgt[:, 1:, None]).sum().item()


sentence_bleu = BLEU(effective_order=True)
gains = sorted(((sentence_bleu.sentence_score(b, [r]).score - sentence_bleu.sentence_score(g, [r]).score, i)
                for i, (g, b, r) in enumerate(zip(greedy_out, beam_out, references))), reverse=True)  # fmt: skip
changed = sum(g != b for g, b in zip(greedy_out, beam_out))
print(f"beam search changes {changed} of {len(sources)} translations")


def log_p_and_score(source, translation):
    """(log p, log p / lp): the model's log-probability of a translation, and the score beam search ranks by."""
    log_p = sentence_log_prob(source, translation)
    return log_p, log_p / length_penalty(torch.tensor(len(tokenizer.encode(translation)) + 1), ALPHA).item()


for _, i in gains[:3]:
    print(f"\nDE:     {sources[i]}\nref:    {references[i]}")
    for name, translation in (("greedy", greedy_out[i]), ("beam", beam_out[i])):
        log_p, ranked = log_p_and_score(sources[i], translation)
        print(f"{name + ':':7} {translation}   (log p = {log_p:.2f}, log p / lp = {ranked:.3f})")
    assert log_p_and_score(sources[i], beam_out[i])[1] > log_p_and_score(sources[i], greedy_out[i])[1]

# %% [markdown]
# Two kinds of gain show up. In some sentences beam search finds a translation the model itself rates as more
# probable than greedy's: greedy decoding's first word led it astray ("The large group ..." against "This is a
# large group ..."). In others the beam's translation is *less* probable, but longer, and wins on the penalised
# score: the length penalty at work ("A man is using ..." against "A man using ..."). In all three the beam's
# penalised score is the higher (asserted), but that is not guaranteed: at each step the search keeps the $K$
# prefixes with the best log-probability, and the penalty ranks only the $K$ kept at the end, so greedy's translation
# can fall out of the beam although its penalised score is better. The next cell counts how often that happens among
# the translations beam search changes, each text scored as the tokenizer splits it (as the cell above scores), and
# splits section 7's BLEU into its two factors, the brevity penalty and the n-gram precisions:

# %%
greedy_better = sum(
    log_p_and_score(sources[i], greedy_out[i])[1] > log_p_and_score(sources[i], beam_out[i])[1]
    for i in range(len(sources))
    if greedy_out[i] != beam_out[i]
)
print(f"of the {changed} translations beam search changes, greedy's has the better penalised score in {greedy_better}")
for name, score in detail.items():
    print(f"{name:>7}: BLEU {score.score:.2f} = brevity penalty {score.bp:.3f} x {score.score / score.bp:.2f} "
          f"(output {score.sys_len:,} 13a tokens for the references' {score.ref_len:,})")  # fmt: skip
greedy_score, beam_score = detail.values()
assert 0 < greedy_better < changed / 10  # it happens, rarely
assert greedy_score.sys_len < beam_score.sys_len <= beam_score.ref_len  # greedy's shorter, the beam's closer
assert abs(beam_score.score / beam_score.bp - greedy_score.score / greedy_score.bp) < 0.5  # the n-gram part

# %% [markdown]
# Beam search changes about half of the translations, and in a few of them it returns a text with a worse penalised
# score than greedy's. Two things can cause that, and the count does not tell them apart. One is the search: it
# prunes by log-probability, as many implementations do (Wu et al. compare finished hypotheses by their penalised
# score during the search), so a hypothesis that would have scored better can be dropped early. The other is how the
# texts are scored: each is encoded again in the tokenizer's own split, while the model now and then writes a word
# in other pieces (two pieces, say, where the tokenizer would give one), which the model scores otherwise. And its gain over the whole test
# set comes from the brevity penalty: greedy's translations are shorter than the references, the beam's, ranked with
# the length penalty, are closer to their length, while the part of BLEU that counts matching n-grams is about the
# same for both (printed). Here the length penalty, not a more accurate search, is what beam search buys.
#
# ### BLEU against beam size, and by sentence length
#
# The cell below scores the first 200 test sentences with beams of 1, 2, 4 and 8 (1 and 4 from the translations
# above; beams 2 and 8 decode only these 200, to keep the cell short), then splits the full test set by source
# length, in words, and scores each part on its own, each time as a difference from greedy decoding:

# %%
subset = slice(0, 200)
sizes = [1, 2, 4, 8]
outputs_by_size = {1: greedy_out[subset], BEAM: beam_out[subset]}
for k in sizes:
    if k not in outputs_by_size:
        outputs_by_size[k] = translate(model, tokenizer, sources[subset], beam_size=k, alpha=ALPHA)
by_size = {k: bleu_difference(outputs_by_size[1], outputs_by_size[k], references[subset]) for k in sizes}
for k, gain in by_size.items():
    print(f"beam {k}: BLEU {gain.bleu_b:.2f} on test sentences 1-200; minus greedy {gain}")
bins = [(1, 9), (10, 12), (13, 15), (16, 50)]  # source words
by_length = {}
for low, high in bins:
    idx = [i for i, s in enumerate(sources) if low <= len(s.split()) <= high]
    by_length[f"{low}-{high} words\n({len(idx)} sentences)"] = bleu_difference(
        [greedy_out[i] for i in idx], [beam_out[i] for i in idx], [references[i] for i in idx]
    )
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
for ax, gains, labels in ((ax1, list(by_size.values()), sizes), (ax2, list(by_length.values()), list(by_length))):
    x = range(len(gains))
    ax.errorbar(x, [g.difference for g in gains], fmt="o", capsize=4,
                yerr=[[g.difference - g.low for g in gains], [g.high - g.difference for g in gains]])  # fmt: skip
    ax.axhline(0, color="gray", lw=0.8)
    ax.set(xticks=list(x), xticklabels=labels, ylabel="BLEU minus greedy's")
ax1.set(xlabel="beam size K", title=f"Beam K minus greedy (alpha {ALPHA}, test sentences 1-200)")
ax2.set(title=f"Beam {BEAM} minus greedy, by source length (test 2016)")
plt.show()
for name, gain in by_length.items():
    print(f"{name.splitlines()[0]:>12}: greedy {gain.bleu_a:.2f}, beam {BEAM} {gain.bleu_b:.2f}, difference {gain}")
clear = [name.splitlines()[0] for name, g in by_length.items() if g.low > 0]
print(f"length bands where the beam's gain is clear of zero: {len(clear)} of {len(by_length)} ({', '.join(clear)})")
scores = [(g.bleu_a, g.bleu_b) for g in by_length.values()]
assert max(scores[-1]) < min(min(v) for v in scores[:-1])
assert all(g.low <= 0 <= g.high for k, g in by_size.items() if k > 1), "200 sentences cannot tell these beams apart"
assert all(g.difference > 0 for g in by_length.values()) and len(clear) < len(by_length)

# %% [markdown]
# Each point is a difference from greedy decoding, with its 95% paired-bootstrap interval. On the first 200
# sentences the beams of 2, 4 and 8 move BLEU by a few tenths of a point either way, and every interval spans zero
# (asserted): 200 sentences cannot rank these beams, though this run prints beam 2 below greedy and 4 and 8 above.
# Over the whole test set (section 7), beam 4's gain is clear of zero. By length, the beam scores higher than greedy
# in every band in this run (asserted), but its interval clears zero in fewer than all four bands (the count is
# printed): a band of one to four hundred sentences is too few to show, on its own, a gain of under a point. (And
# with four intervals at 95%, one clearing zero by chance would not be surprising: one band's interval is no finding
# on its own.) The longest sentences (16 words or more) score lowest, by several points (asserted): they have more
# words to get right, and, a guess this chapter does not test, more room for an early mistake to derail the rest.
#
# ## 8. Inside the model: alignments from cross-attention
#
# Translation systems before the Transformer learned an *alignment*: which source words each target word comes
# from. Cross-attention is a soft alignment of its own. For two test sentences the cell runs the decoder on its
# own beam translation (teacher forcing), records every cross-attention head, and draws each layer's weights,
# averaged over its heads: columns are the German subwords read; each row is the decoder position that *writes*
# the English subword it is labelled with (its query reads the subwords before it); one colour scale. As in every
# chapter, layers are counted from 1 and heads from 0.


# %% tags=["nbval-ignore-output"]
def cross_attention(i):
    """Each decoder layer's cross-attention (heads averaged) for test sentence i and its beam translation."""
    src = torch.tensor([tokenizer.encode(sources[i])], device=device)  # (1, S)
    tgt = torch.tensor([tokenizer.encode(beam_out[i], bos=True, eos=True)], device=device)  # (1, T + 1)
    with torch.no_grad(), record_attention(model) as attention:
        model(src, tgt[:, :-1], padding_mask(src, tokenizer.pad_id), target_mask(tgt[:, :-1], tokenizer.pad_id))
    layers = [attention[f"decoder.layers.{n}.cross_attn"][0] for n in range(recipe.model.n_layers)]  # (h, T, S)
    written = [*tokenizer.tokenize(beam_out[i]), "<eos>"]  # row t writes token t + 1
    return torch.stack(layers), tokenizer.tokenize(sources[i]), written


examples = [i for i, s in enumerate(sources) if 7 <= len(s.split()) <= 9][:2]  # two short sentences
for i in examples:
    weights, read, written = cross_attention(i)  # (layers, h, T, S)
    display(attention_grid(weights.mean(1), read, written, titles=[f"layer {n + 1}" for n in range(len(weights))],
                           ncols=3, suptitle=f"Cross-attention, heads averaged: {sources[i]!r}"))  # fmt: skip

# %% [markdown]
# The last layer reads like an alignment: the rows that write content words look most at the German word they
# translate (`hat` at `Hut`, `orange` at `orangefarbenen`, `people` at `Menschen`; the cell below asserts these), and where the word orders differ the alignment
# leaves the diagonal: in the first sentence, `looking` looks at the end of the German verb `anstarrt`, which closes
# its clause after `etwas`, the German for `something`. In these two sentences the second layer aligns more
# loosely, and the first spreads its attention thinly, with much of it on the final full stop. The interactive chart holds the last layer's eight
# heads for the second sentence (pick a head, hover for the weights); the cell prints how sharply each head
# focuses: the average, over the rows, of a row's largest weight (1 would put all of a row's attention on one
# subword).

# %% tags=["nbval-ignore-output"]
weights, read, written = cross_attention(examples[1])
focus = weights[-1].max(dim=-1).values.mean(dim=-1)  # (h,): each head's mean largest weight per row
print("last layer, mean largest weight per row:", ", ".join(f"head {h} {f:.2f}" for h, f in enumerate(focus.tolist())))
attention_chart(weights[-1], read, written, head_names=[f"layer {len(weights)}, head {h}" for h in range(len(weights[-1]))],
                title="Cross-attention of the last layer")  # fmt: skip

# %% [markdown]
# The same alignment as text: for each row of the last layer (heads averaged), the German subword it reads most.
# The second sentence ends in a word the model does not know. "Iglu" occurs in two training sentences; byte-pair
# encoding spells it from four fragments, so no token of it is unknown to the model, but nothing tells it what the word
# means either:

# %%
aligned = {}
for i in examples:
    weights, read, written = cross_attention(i)
    most = weights[-1].mean(0).argmax(-1)  # (T,): the most-read German subword of each row
    print(" ".join(f"{w}<-{read[int(j)]}" for w, j in zip(written, most)))
    aligned.update({w: read[int(j)] for w, j in zip(written, most)})
for english, german in (("▁hat", "Hut"), ("▁orange", "orangefarbenen"), ("▁people", "Menschen")):
    assert aligned[english].strip("▁") in german, (english, aligned[english])
iglu = examples[1]
print(f"\nsource:    {sources[iglu]}\nreference: {references[iglu]}\nbeam:      {beam_out[iglu]}\ngreedy:    "
      f"{greedy_out[iglu]}")  # fmt: skip
print(
    f"German training sentences with 'Iglu': {sum('Iglu' in de for de, _ in train_pairs)}; English ones with "
    f"'igloo': {sum('igloo' in en.lower() for _, en in train_pairs)}; 'Iglu' in subwords: {tokenizer.tokenize('Iglu')}"
)
assert "igloo" not in beam_out[iglu].lower()

# %% [markdown]
# The model writes "Igo": partly copied, partly invented. The rows that write `▁I` and `g` read the fragments `▁I`
# and `l` of "Iglu", and the row that writes `o` reads `u` (printed above); "igloo" itself occurs in two English
# training sentences, too few for the model to have learned it. Subwords make every word *writable*, not every word
# *known*: a rare word's meaning still has to be learned from examples, and two are not enough.

# %% [markdown]
# ## 9. Try your own sentence
#
# Change `my_sentences` and run the cell. The model knows the world of Multi30k: people, animals, sports, streets,
# colours. Try a sentence from outside that world too, and see what it makes of it.

# %%
my_sentences = ["Ein kleines Mädchen spielt mit einem roten Ball im Park.", "Zwei Männer fahren Fahrrad im Regen."]
for sentence, translation in zip(my_sentences, translate(model, tokenizer, my_sentences, beam_size=BEAM, alpha=ALPHA)):
    print(f"{sentence}\n -> {translation}")

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | a tokenizer learned on the test set too | optimistic scores | learn the merges on the training text only (done here) |
# | a vocabulary per language with shared embeddings | the same id means different words | one vocabulary for both (section 2), or no sharing |
# | a merge matched inside longer symbols (string replace) | wrong, non-reproducible segmentations | merge whole symbols (`merge_pair`) |
# | beam search without a length penalty | short translations, and BLEU pays the brevity penalty | divide by $\mathrm{lp}(y)$ (section 6) |
# | the $K$ starting hypotheses all live | the beam fills with copies of one hypothesis | start all but one at $-\infty$ |
# | a cache not reordered after a beam step | a hypothesis continues another's prefix | reorder the self-attention caches by `parent` |
# | label smoothing as $\sum q (\log q - \log p)$ with `log` | a NaN or infinite loss (`log(0)`) | `F.cross_entropy(..., label_smoothing=0.1)`, as `train_translator` does ([bug lab: bug 10](09_bug_lab.ipynb#bug-10)) |
# | BLEU on tokenised or lower-cased text | scores not comparable with others | sacreBLEU on detokenised text, with its signature |
# | choosing the beam size or $\alpha$ on the test set | an optimistic test score | choose on the validation set (done here) |
#
# ## Summary
#
# - Byte-pair encoding learns a subword vocabulary by merging the most frequent adjacent pair again and again:
#   common words become one token, rare ones are spelled from fragments, and only an unseen character is unknown. The course's version
#   learns exactly the merges of Hugging Face's trainer; the library is the fast way.
# - One vocabulary for both languages lets one matrix embed source and target words and project back to words.
# - Beam search keeps the $K$ best prefixes; with a length penalty it beats greedy decoding here by the margin
#   printed in section 7, all of it from the brevity penalty. Without one it prefers short translations. Caching
#   keys and values gives the same translations in less time.
# - BLEU is a corpus-level, clipped $n$-gram precision with a brevity penalty; sacreBLEU's signature makes it
#   comparable.
# - Cross-attention in the last decoder layer reads like a word alignment (in the two sentences shown; three
#   content words asserted).
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1: encoding by rank.** The simplest way to encode a word is to replay every merge, in the order
# learned: with 3,894 merges that is 3,894 passes over each word, most of them finding nothing. Tokenizers in
# practice (GPT-2's, Hugging Face's, and `BPETokenizer.segment`) do it the other way round: give each merge its
# *rank* (its position in the list), then, again and again, look at the adjacent pairs the word has *now*, merge
# every occurrence of the one with the lowest rank, and stop when no adjacent pair is a merge. Write
# `my_bpe_segment(piece, merges)` that way: a piece (e.g. `"▁banana"`) and the merges, a list of pairs in the order
# they were learned, in; the piece's symbols out, a list of strings. Example: with the merges `("a", "n")`,
# `("b", "an")`, `("an", "a")`, the piece `"banana"` becomes `b an an a`, then `ban an a`, then `ban ana`.
#
# Then think: why must the result be the same as replaying the list (a merge can only create pairs that contain its
# new symbol: when were those learned)? The checker compares with `BPETokenizer.segment`, and recognises the highest
# rank taken first, a merge applied to its first occurrence only, merges made by replacing strings, and the
# longest-match rule of WordPiece (BERT's tokenizer).


# %% tags=["exercise"]
def my_bpe_segment(piece, merges):
    """A piece (str) and merges (list of (a, b) pairs, in learned order) -> its symbols (list of str)."""
    ### BEGIN SOLUTION
    rank = {pair: r for r, pair in enumerate(merges)}
    symbols = list(piece)
    while len(symbols) > 1:
        present = [pair for pair in itertools.pairwise(symbols) if pair in rank]
        if not present:
            break
        symbols = merge_pair(
            symbols, min(present, key=lambda pair: rank[pair])
        )  # every occurrence of the earliest merge
    return symbols
    ### END SOLUTION


check_bpe_segment(my_bpe_segment)

# %% [markdown]
# **Exercise 2: BLEU's clipped matches.** Write `my_ngram_matches(hypothesis, reference, n)`: two lists of words
# and $n$ in; `(matches, total)` out, where `total` is the number of $n$-grams in the hypothesis and `matches` how
# many of them the reference has, each $n$-gram counted at most as often as it occurs in the reference. Hint:
# `Counter` of tuples, and `&` of two Counters keeps the minimum of each count. The checker compares with
# sacreBLEU's own counts, and recognises unclipped matches and a total taken from the reference. (Summing these
# over a corpus, for $n = 1 \ldots 4$, gives the four precisions of section 7.)


# %% tags=["exercise"]
def my_ngram_matches(hypothesis, reference, n):
    """Two lists of words and n -> (clipped matches, number of n-grams in the hypothesis)."""

    ### BEGIN SOLUTION
    def ngrams(words):
        return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    return sum((ngrams(hypothesis) & ngrams(reference)).values()), max(len(hypothesis) - n + 1, 0)
    ### END SOLUTION


check_ngram_matches(my_ngram_matches)

# %% [markdown]
# **Going further.** Learn a vocabulary four times smaller, and one twice as large, and compare the token counts
# per sentence. Or
# translate the other way: the corpus is parallel, so swapping each pair makes an English→German task, and
# `train_translator` trains it (the shipped recipe took 72 minutes of training, evaluations aside, on a CPU).
#
# Next, [chapter 09](09_bug_lab.ipynb): the classic bugs of from-scratch Transformers, trained on the course's
# tasks, and the probes that catch them.
