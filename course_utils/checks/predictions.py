""" "Predict, then run": the student commits to an answer before the cell that measures it, and the checker
explains what each wrong answer would have meant.

A question lives here, not in the notebook, so that the student edition does not give the answer away. In the
notebook it reads::

    my_prediction = None  # your answer here
    check_prediction("post-norm-warmup", my_prediction)  # your answer: "a", "b", "c" or "d"

and the graders report it as the exercise ``check_prediction[post-norm-warmup]``: ``answered`` once it holds one of the
letters, right or wrong (the verdict in the notebook says which, and why), since each explanation teaches the answer
and a retried prediction predicts nothing; ``not attempted`` while it is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._core import NotWritten, NotYet, Verdict, verdict

__all__ = ["QUESTIONS", "Question", "check_prediction", "judge"]


@dataclass(frozen=True)
class Question:
    """A multiple-choice prediction: ``choices`` maps each letter to its statement, ``why`` maps each letter to
    what choosing it shows (for a wrong letter: the misconception behind it; for ``answer``: why it holds);
    ``measured_by`` names the cell whose measurement settles it."""

    chapter: str
    choices: dict[str, str]
    answer: str
    why: dict[str, str]
    measured_by: str = "the next cell"

    def __post_init__(self) -> None:
        if self.answer not in self.choices or set(self.why) != set(self.choices):
            raise ValueError("every choice needs an explanation, and the answer must be one of the choices")


QUESTIONS: dict[str, Question] = {
    # 01 · attention
    "unscaled-scores": Question(
        chapter="01",
        choices={
            "a": "it stays near 1/16 = 0.06: random keys look alike, so the weights stay uniform",
            "b": "it stays about the same: the weights always sum to 1, whatever d_k",
            "c": "it climbs towards 1: one key takes nearly all the weight",
            "d": "it falls: more dimensions spread the weight over more keys",
        },
        answer="c",
        why={
            "a": "Random keys are alike only on average: each score q . k is a sum of d_k random terms, so the "
            "scores spread out (variance d_k) and the softmax turns the growing gaps into very unequal weights.",
            "b": "Summing to 1 fixes the total, not how it is shared: the wider the gaps between the scores, the "
            "more the softmax gives to the largest one.",
            "c": "The unscaled scores have variance d_k, so their spread grows like sqrt(d_k); exp() turns wide gaps "
            "into a winner-takes-all softmax, which saturates and barely passes gradients back.",
            "d": "d_k is the size of each vector, not the number of keys (16 throughout); more dimensions make the "
            "scores larger and more spread out, which concentrates the weight instead of spreading it.",
        },
    ),
    # 02 · multi-head attention
    "one-head-two-jobs": Question(
        chapter="02",
        choices={
            "a": "it solves both jobs, a little less accurately: same parameters, same capacity",
            "b": "it keeps the previous-digit job and gives up the marked digit",
            "c": "it keeps the marked-digit job and gives up the previous digit",
            "d": "it solves neither: its loss stays near 2 ln 10",
        },
        answer="c",
        why={
            "a": "The parameters are the same, but one head has one softmax: each position gets one weighted average "
            "of the value vectors, and a blend of the marked and the previous token cannot tell the read-outs which "
            "digit came from where.",
            "b": "Nothing forbids it, but the marker is the easier target: its own embedding flags it and it is the same "
            "key for every query, while looking back needs a different key per query, found through the positions "
            "(the two-head model's look-back head was the less focused one, too).",
            "c": "One softmax serves one job here. The head puts nearly all its weight on the marked token, flagged by "
            "its own embedding, so every position receives the marked digit's vector; the previous digit is not in "
            "it, and that job stays at chance.",
            "d": "Giving up one job still leaves the other to learn: the loss falls to the ln 10 plateau (one job "
            "solved, the other at chance), not 2 ln 10.",
        },
    ),
    # 03 · positional encoding
    "shuffled-tokens": Question(
        chapter="03",
        choices={
            "a": "the outputs are the original outputs, shuffled the same way as the tokens",
            "b": "nothing changes: the outputs come out as before, in the original order",
            "c": "every output changes: each token now has different neighbours, so it gets a new vector",
        },
        answer="a",
        why={
            "a": "Without positions, a token's output depends only on which tokens are around it (a weighted sum "
            "over all of them), not where they sit: shuffling the input shuffles the output rows, nothing else. "
            "Attention is permutation-equivariant.",
            "b": "Attention does not sort its input back: output row i belongs to input token i, so when the "
            "tokens move, their outputs move with them.",
            "c": "Neighbours matter only through their positions, and attention has none: every token still "
            "attends to the same set of keys and values, so it gets the same weighted sum, wherever it sits.",
        },
    ),
    # 04 · the encoder
    "post-norm-warmup": Question(
        chapter="04",
        choices={
            "a": "all three learn: the warm-up only makes post-norm a little faster",
            "b": "none learns: all three stay near ln 10, lr = 1e-2 being too high for 12 layers whatever the order",
            "c": "pre-norm without warm-up stalls near ln 10; post-norm learns with or without a warm-up",
            "d": "post-norm without warm-up stalls near ln 10; with a warm-up it learns, and so does pre-norm "
            "without one",
        },
        answer="d",
        why={
            "a": "At this learning rate the warm-up is not a refinement but the difference between learning and not: "
            "post-norm's large early gradients near the output make full-size first steps unstable.",
            "b": "The rate is high but not hopeless: pre-norm, or post-norm with small first steps, handles it. Only "
            "the combination of post-norm and full steps from the start fails.",
            "c": "It is the other way round: pre-norm leaves the residual stream unnormalised, so each layer only adds "
            "to it and the gradients stay well-behaved; the paper's post-norm is the order that needs the warm-up.",
            "d": "In a post-norm stack every residual path passes through a LayerNorm, and at initialisation the "
            "gradients near the output are large (Xiong et al. 2020): full steps from step 1 wreck it, small "
            "warm-up steps do not. Pre-norm keeps an untouched residual path and trains without the warm-up.",
        },
    ),
    # 05 · the decoder
    "decoder-future": Question(
        chapter="05",
        choices={
            "a": "only outputs 4 and 5 change; outputs 0-3 do not move at all",
            "b": "all six outputs change",
            "c": "outputs 4 and 5 change a lot, outputs 0-3 a tiny bit (softmax and LayerNorm mix every position)",
            "d": "no output changes: the mask hides the changed tokens",
        },
        answer="a",
        why={
            "a": "Row t of the causal mask allows columns <= t only, and everything else in the layer (LayerNorm, "
            "feed-forward, cross-attention to the unchanged memory) works position by position, so outputs 0-3 "
            "cannot see positions 4 and 5.",
            "b": "That is the layer without a mask: the causal mask gives the future tokens weight exactly 0 in the "
            "rows of positions 0-3.",
            "c": "The softmax of row t runs over the allowed columns only (the masked scores are -inf, weight exactly "
            "0), and LayerNorm normalises each position over its own d_model features, not across positions: "
            "nothing mixes positions except attention.",
            "d": "The mask hides the future from EARLIER positions; positions 4 and 5 read their own (changed) "
            "input, so their outputs change.",
        },
    ),
    # 06 · the full Transformer
    "smoothing-floor": Question(
        chapter="06",
        choices={
            "a": "0, reached by putting probability 1 on the right token",
            "b": "a floor above 0, and probability 1 on the right token scores far above that floor",
            "c": "below 0: the smoothed targets reward spreading probability",
        },
        answer="b",
        why={
            "a": "With smoothing the target is not one-hot: the other V - 1 tokens get eps/V each, and a model that "
            "gives them probability 0 pays -(eps/V) ln 0, a huge loss (infinite in the limit).",
            "b": "The cross-entropy -sum q ln p is smallest at p = q, where it equals the entropy H(q) > 0, since q "
            "is not one-hot; a confident model is punished for the tokens it rules out.",
            "c": "A cross-entropy -sum q ln p can never be negative: every p <= 1 makes every -ln p >= 0.",
        },
        measured_by="the cell after the training",
    ),
    # 07 · the GPT
    "temperature-to-zero": Question(
        chapter="07",
        choices={
            "a": "more varied: more different characters come up",
            "b": "unchanged: dividing every logit by the same number keeps their order, so the draws stay the same",
            "c": "uniformly random: every character comes up about equally often",
            "d": "the greedy choice, repeated: nearly every draw is the most likely character",
        },
        answer="d",
        why={
            "a": "That is what a temperature above 1 does: dividing the logits by a large number shrinks their gaps "
            "and flattens the distribution. A small temperature does the opposite.",
            "b": "The order is kept, but the softmax depends on the gaps between the logits, not only their order "
            "(it ignores adding a constant, not multiplying by one): scaling the gaps up sharpens the distribution.",
            "c": "Uniform draws come at a very *high* temperature, where all logits / T shrink towards 0. As T goes to "
            "0 the logits / T grow apart instead.",
            "d": "Dividing the logits by a small temperature multiplies the gaps between them, and the softmax turns "
            "large gaps into nearly all the probability for the largest logit: sampling becomes the argmax.",
        },
    ),
    # 08 · translation
    "beam-without-penalty": Question(
        chapter="08",
        choices={
            "a": "longer than greedy's: a wider search finds the complete, longer translations greedy cuts short",
            "b": "about as long: the length is set by the source sentence, whatever the search",
            "c": "shorter than greedy's: scored by their summed log-probability, whole hypotheses that end early win",
        },
        answer="c",
        why={
            "a": "Beam search looks for the most *probable* translation, not the most complete one: every extra "
            "token multiplies in a probability below 1, so a wider search finds the short, probable endings greedy "
            "decoding walks past.",
            "b": "The source suggests a length, but the search decides between the hypotheses it keeps: scored by "
            "log-probability alone, a hypothesis that ends early has fewer negative terms in its sum.",
            "c": "Each token adds a negative log-probability, so without a length penalty the search favours "
            "hypotheses that stop early; greedy decoding, which never compares whole hypotheses, is shielded from "
            "this only by its blindness.",
        },
    ),
    # 09 · the bug lab
    "leaky-loss": Question(
        chapter="09",
        choices={
            "a": "the model without a mask, far lower",
            "b": "about the same: the mask changes what is learned, not how well the loss falls",
            "c": "the causal model: the one without a mask learns nothing useful, so its loss stays high",
        },
        answer="a",
        why={
            "a": "Each position reads the next character from the position that holds it, and validation windows "
            "hold it too, so even the validation loss is low. Generation, where the next character does not exist "
            "yet, shows what was learned.",
            "b": "The loss measures exactly what the leak makes easy: predicting a character that is in plain view. "
            "The two runs face different problems, one of them nearly trivial.",
            "c": "Without a mask each position can read the character it must predict, at the next position of its "
            "own window: copying it is far easier than predicting it, so the loss falls much faster.",
        },
    ),
    # 10 · GPT-2 and Llama
    "rotary-pairing": Question(
        chapter="10",
        choices={
            "a": "the logits stay the same: both pairings turn by the same angles",
            "b": "the logits change at every position, the first one included",
            "c": "an error: the shapes no longer fit",
            "d": "the first position's logits stay the same; every later position's change",
        },
        answer="d",
        why={
            "a": "The angles are the same, but they turn other pairs of dimensions: the weights were made for Hugging "
            "Face's layout, dimension i paired with i + d/2, and the other pairing turns dimensions together that "
            "were never paired.",
            "b": "The first position is spared: under the causal mask its query sees one key, its own, which gets all "
            "the weight (a softmax over one score is 1) whatever the rotation does to the query and the key, so its "
            "output, and its logits, are Llama's.",
            "c": "Both pairings take and return (..., T, d_k) tensors: nothing fails, which is what makes this bug "
            "silent.",
            "d": "The first query sees one key, its own (causal mask), and a softmax over one score gives it all the "
            "weight whatever the rotation does, so the first position's output is Llama's; from position 1 on a "
            "query weighs several keys, the wrong pairs change their scores, and the logits change.",
        },
    ),
    # 11 · data-parallel training
    "same-batches": Question(
        chapter="11",
        choices={
            "a": "one process trained on batches of 16 rows (two different batches of 8 per step)",
            "b": "one process trained on the same batches of 8 rows",
            "c": "nothing a single process computes: the ranks' weights drift apart",
            "d": "no weights at all: the run hangs",
        },
        answer="b",
        why={
            "a": "Sixteen rows a step would take two different batches, and here both ranks read the same 8: the "
            "all-reduce averages two copies of one gradient. Two ranks divide the work only when each reads its own "
            "rows (a DistributedSampler, or a seed of its own).",
            "b": "Both ranks start from the same weights and compute the same gradient on the same 8 rows; the mean "
            "of two equal gradients is that gradient, so every step is the one-process step on those 8 rows: a "
            "one-process run that costs two processes.",
            "c": "The ranks cannot drift apart: DDP copies rank 0's weights to every rank at the start and averages "
            "the gradients at every step, so every rank takes the same step whatever rows it read, and here the rows "
            "are even the same.",
            "d": "Every collective is joined: both ranks take the same 5 steps and make the same all-reduce calls. A "
            "run hangs when one rank skips a collective that the others wait in (an uneven last batch, an all-reduce "
            "of a logged metric under `if rank == 0`).",
        },
    ),
    # 12 · adapting a pretrained model
    "tuning-forgets": Question(
        chapter="12",
        choices={
            "a": "it stays within 0.1 nat per token after both methods: tuning only taught a new format",
            "b": "it falls by more than 0.1 nat after both: more training, a better model",
            "c": "it rises by more than half a nat after both",
            "d": "it rises by more than half a nat after full fine-tuning and stays within 0.1 nat after LoRA, whose "
            "pretrained weights are frozen",
        },
        answer="c",
        why={
            "a": "A new format is learned by changing weights that every text goes through: the same embeddings, "
            "attention and feed-forward layers read Shakespeare too, and 300 steps pull them towards short templated "
            "answers.",
            "b": "More training helps on the data trained on; these steps see only instructions, none of the "
            "pretraining text, so nothing pushes the Shakespeare loss down and much pushes it up.",
            "c": "Every step moves the model towards instruction pairs and away from what it was pretrained on: "
            "catastrophic forgetting. LoRA is no shield, since its adapters change every adapted layer's output on "
            "every text, whatever the frozen weights hold.",
            "d": "The weights are frozen, not the function: h = Wx + (alpha/r) BAx changes the output of every adapted "
            "layer for every input, Shakespeare included, so LoRA forgets too (merging BA into W makes that plain).",
        },
    ),
}


def _letter(answer: object) -> str:
    """A letter as a student may write it: "C", "(c)", " c " -> "c"."""
    return str(answer).strip().lower().strip("()")


def judge(q: Question, answer: object, unanswered: str, after_wrong: str = "", after_right: str = "") -> str:
    """The verdict on a multiple-choice ``answer`` (a letter, in any case, with or without parentheses): the
    explanation of the choice, raised as ``NotYet`` unless it is the answer. ``unanswered`` (with ``{letters}``)
    is the message while the answer is still None."""
    letters = ", ".join(f'"{letter}"' for letter in q.choices)
    if answer is None:
        raise NotWritten(unanswered.format(letters=letters))
    choice = _letter(answer)
    if choice not in q.choices:
        raise NotYet(f"{answer!r} is not one of the choices: answer with one of {letters}.")
    if choice != q.answer:
        raise NotYet(f"not quite: ({choice}) {q.choices[choice]}. {q.why[choice]}{after_wrong}")
    return f"right: ({choice}) {q.choices[choice]}. {q.why[choice]}{after_right}"


def check_prediction(question: str, answer: str | None) -> Verdict:
    """Respond to a prediction: ``answer`` is one letter of ``QUESTIONS[question].choices`` (None: not made yet)."""
    if question not in QUESTIONS:
        raise KeyError(f"no question {question!r}; known: {', '.join(sorted(QUESTIONS))}")
    q = QUESTIONS[question]

    def run() -> str:
        return judge(
            q,
            answer,
            "make your prediction first: set my_prediction to one of {letters}, then run the cell.",
            after_wrong=f" Run {q.measured_by} and see which choice the measurement supports.",
            after_right=f" {q.measured_by[0].upper()}{q.measured_by[1:]} measures it.",
        )

    result = verdict(run, name=f"check_prediction[{question}]")
    if answer is not None and _letter(answer) in q.choices:
        # Graded as participation: the explanations teach the answer, so a second try is no prediction.
        result.status = "answered"
    return result
