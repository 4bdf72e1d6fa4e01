"""Generate freezestats' demo task: English subject-verb agreement acceptability (``agreement``).

Why this exists
---------------
freezestats needs a small classification task that ships with the package, so that the demo, the tests
and a first study run work offline, without downloading GLUE and without redistributing anybody else's
corpus. Public acceptability corpora (CoLA, BLiMP, ...) come with their own licences and sentences; this
script writes every sentence from a small hand-written grammar and vocabulary instead, so the data set is
the project's own work (MIT, like the rest of freezestats) and can be rebuilt bit for bit.

Subject-verb agreement is a real syntactic skill that pretrained encoders hold to different degrees in
different layers, which is what a layer-freezing study should be able to see. The grammar mixes easy
items (a pronoun or a noun directly before its verb) with hard ones (a noun of the other number between
the subject and its verb: one or two prepositional phrases, object and subject relative clauses). The
mix, the share of forms of *be* among the agreeing words and the Zipf-like frequency of head nouns and
verbs were tuned by fine-tuning all-MiniLM-L6-v2 on 200 examples (see data/demo/README.md) so that a
small model learns the task clearly but does not solve it.

Every item is a BLiMP-style minimal pair: the grammatical sentence (label 1) and the same sentence with
only the agreeing verb or auxiliary switched to the other number (label 0). Both members of a pair go to
the same split and no sentence occurs twice anywhere, so train and validation never share a sentence.
Within every construction the numbers of the head noun and of the attractor noun(s) cycle through all
combinations, so neither the verb form nor the nearest noun predicts the label.

Run ``python data/demo/make_agreement.py`` to rewrite ``data/demo/agreement/{train,validation}.parquet``
(HF GLUE single-sentence schema: ``sentence`` string, ``label`` int64, ``idx`` int32). The output is a pure
function of ``SEED`` and the tables below; only numpy, pandas and pyarrow are needed.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20240917
N_TRAIN = 3000  # sentences (= 1500 minimal pairs)
N_VALIDATION = 800  # sentences (= 400 minimal pairs)
OUT_DIR = Path(__file__).resolve().parent / "agreement"

# Share of minimal pairs per construction (the same shares in both splits).
CONSTRUCTIONS: dict[str, float] = {
    "pronoun": 0.45,  # She is late. / They were arrested.                       (no attractor)
    "simple": 0.15,  # The old man often sleeps. / The children are hungry.      (no attractor)
    "pp": 0.15,  # The pilot near the tables is tired.                          (one PP attractor)
    "pp2": 0.08,  # The key to the cabinets in the hall was stolen.            (two stacked PPs)
    "obj_rel": 0.09,  # The author that the guards like smiles.               (object relative clause)
    "subj_rel": 0.08,  # The senator who admires the farmers was late.        (subject relative clause)
}
# Relative weights of the agreeing word: is/are + adjective, is/are + -ing, was/were, has/have,
# doesn't/don't, and a lexical verb in the present tense (-s vs bare).
PREDICATE_WEIGHTS: dict[str, int] = {"be_adj": 8, "be_ing": 2, "was": 3, "have": 1, "do": 1, "verb": 1}
HEAD_ZIPF = 1.5  # head nouns are drawn with weight 1 / rank**HEAD_ZIPF (HEAD_RANKING below)
VERB_ZIPF = 1.5  # agreeing lexical verbs likewise, in the order of their lists
ADVERB_P = 0.15  # chance of an adverb before the agreeing verb or the adjective
TAIL_P = 0.4  # chance of a place or time phrase after an intransitive verb

T = TypeVar("T")


# --------------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    sg: str
    pl: str
    kind: str  # "human" | "animal" | "thing"

    def form(self, plural: bool) -> str:
        return self.pl if plural else self.sg


@dataclass(frozen=True)
class Verb:
    base: str
    s3: str  # third person singular present
    ing: str
    past: str
    pp: str  # past participle


def _plural(word: str) -> str:
    if word.endswith(("s", "sh", "ch", "x")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _nouns(kind: str, spec: str) -> list[Noun]:
    """``"pilot child:children"`` -> nouns; a bare word takes the regular plural from ``_plural``."""
    out = []
    for item in spec.split():
        sg, _, pl = item.partition(":")
        out.append(Noun(sg, pl or _plural(sg), kind))
    return out


def _words(spec: str) -> list[str]:
    return spec.split()


def _verbs(spec: str) -> list[Verb]:
    """One verb per ``;``-separated entry: ``base 3sg ing past participle``."""
    return [Verb(*entry.split()) for entry in spec.split(";") if entry.strip()]


HUMANS = _nouns(
    "human",
    "boy girl pilot author senator farmer guard teacher student doctor nurse lawyer painter singer dancer "
    "driver baker soldier sailor visitor neighbor manager officer clerk artist actor athlete customer "
    "tourist scientist engineer musician professor judge journalist architect mayor surgeon pianist "
    "gardener owner friend cousin captain boss witness waitress coach lady baby hero:heroes "
    "child:children man:men woman:women person:people policeman:policemen fisherman:fishermen thief:thieves",
)
ANIMALS = _nouns("animal", "dog cat horse puppy fox rabbit mouse:mice goose:geese wolf:wolves")
THINGS = _nouns(
    "thing",
    "key cabinet table box book letter window door picture lamp chair bottle car truck bridge building "
    "house tower bench dish bus glass watch clock photo piano radio painting map desk envelope umbrella "
    "shelf:shelves knife:knives leaf:leaves library factory",
)
ANIMATES = HUMANS + ANIMALS
ALL_NOUNS = HUMANS + ANIMALS + THINGS
# Subjects follow a Zipf-like law, as in running text: these heads come first, then the rest in list order.
_FREQUENT = _words(
    "child teacher friend dog woman man student doctor key car person book cat letter door house box girl boy lady"
)
HEAD_RANKING = [n for w in _FREQUENT for n in ALL_NOUNS if n.sg == w] + [n for n in ALL_NOUNS if n.sg not in _FREQUENT]
# Nouns that fit after "on/under/above" and after "inside", and after "the key to".
SURFACES = [n for n in THINGS if n.sg in _words("table desk bench shelf cabinet chair piano box car truck bridge")]
CONTAINERS = [n for n in THINGS if n.sg in _words("box cabinet car truck house building library desk envelope")]
LOCKABLE = [n for n in THINGS if n.sg in _words("cabinet box car truck house building desk library")]

# Intransitive verbs; the first list also fits animals. List order is frequency rank (VERB_ZIPF).
INTRANS_ANIMAL = _verbs(
    "sleep sleeps sleeping slept slept; wait waits waiting waited waited; eat eats eating ate eaten;"
    "run runs running ran run; play plays playing played played; hide hides hiding hid hidden;"
    "rest rests resting rested rested; swim swims swimming swam swum; yawn yawns yawning yawned yawned;"
    "hurry hurries hurrying hurried hurried"
)
INTRANS_HUMAN = (
    _verbs(
        "work works working worked worked; laugh laughs laughing laughed laughed;"
        "smile smiles smiling smiled smiled; sing sings singing sang sung; dance dances dancing danced danced;"
        "cry cries crying cried cried; complain complains complaining complained complained;"
        "shout shouts shouting shouted shouted; listen listens listening listened listened;"
        "travel travels traveling traveled traveled; worry worries worrying worried worried;"
        "relax relaxes relaxing relaxed relaxed; whistle whistles whistling whistled whistled;"
        "cough coughs coughing coughed coughed; hesitate hesitates hesitating hesitated hesitated;"
        "march marches marching marched marched; blush blushes blushing blushed blushed;"
        "pray prays praying prayed prayed"
    )
    + INTRANS_ANIMAL
)
# Intransitives whose participle reads well after has/have.
PERFECT_HUMAN = _verbs(
    "leave leaves leaving left left; arrive arrives arriving arrived arrived; win wins winning won won;"
    "retire retires retiring retired retired; apologize apologizes apologizing apologized apologized;"
    "resign resigns resigning resigned resigned; vanish vanishes vanishing vanished vanished;"
    "agree agrees agreeing agreed agreed; complain complains complaining complained complained"
)
# Transitive verbs with an animate object; the first list also fits animal subjects.
TRANS_ANIMAL = _verbs(
    "like likes liking liked liked; watch watches watching watched watched;"
    "follow follows following followed followed; chase chases chasing chased chased;"
    "fear fears fearing feared feared; avoid avoids avoiding avoided avoided;"
    "ignore ignores ignoring ignored ignored; trust trusts trusting trusted trusted"
)
TRANS_HUMAN = (
    _verbs(
        "know knows knowing knew known; love loves loving loved loved; see sees seeing saw seen;"
        "help helps helping helped helped; visit visits visiting visited visited; meet meets meeting met met;"
        "admire admires admiring admired admired; hate hates hating hated hated;"
        "praise praises praising praised praised; criticize criticizes criticizing criticized criticized;"
        "remember remembers remembering remembered remembered; thank thanks thanking thanked thanked;"
        "greet greets greeting greeted greeted; blame blames blaming blamed blamed;"
        "hire hires hiring hired hired; support supports supporting supported supported;"
        "respect respects respecting respected respected; envy envies envying envied envied;"
        "teach teaches teaching taught taught; push pushes pushing pushed pushed;"
        "call calls calling called called; hear hears hearing heard heard;"
        "understand understands understanding understood understood;"
        "recognize recognizes recognizing recognized recognized; annoy annoys annoying annoyed annoyed;"
        "impress impresses impressing impressed impressed; protect protects protecting protected protected;"
        "warn warns warning warned warned; miss misses missing missed missed"
    )
    + TRANS_ANIMAL
)
# Human subject, thing object (object relatives with a thing head: "the lamp that the boys use").
TRANS_THING_OBJ = _verbs(
    "use uses using used used; need needs needing needed needed; want wants wanting wanted wanted;"
    "buy buys buying bought bought; sell sells selling sold sold; repair repairs repairing repaired repaired;"
    "clean cleans cleaning cleaned cleaned; paint paints painting painted painted;"
    "carry carries carrying carried carried; find finds finding found found; lose loses losing lost lost;"
    "keep keeps keeping kept kept; open opens opening opened opened; borrow borrows borrowing borrowed borrowed;"
    "fix fixes fixing fixed fixed; wash washes washing washed washed; polish polishes polishing polished polished;"
    "move moves moving moved moved; own owns owning owned owned; check checks checking checked checked"
)
# Thing subject, thing object (subject relatives with a thing head: "the box that contains the letters").
TRANS_THING_SUBJ = _verbs(
    "contain contains containing contained contained; hold holds holding held held;"
    "block blocks blocking blocked blocked; face faces facing faced faced; cover covers covering covered covered;"
    "resemble resembles resembling resembled resembled; touch touches touching touched touched;"
    "match matches matching matched matched; hide hides hiding hid hidden"
)
LINKING = [("seem", "seems"), ("look", "looks"), ("feel", "feels"), ("appear", "appears")]
# Thing predicates with a lexical verb: (base, 3sg, complement).
THING_VERB_PREDICATES: list[tuple[str, str, str]] = [
    ("belong", "belongs", "to the museum"),
    ("look", "looks", "old"),
    ("cost", "costs", "a fortune"),
    ("need", "needs", "a new coat of paint"),
    ("stay", "stays", "in the attic"),
    ("look", "looks", "expensive"),
    ("remain", "remains", "in the hall"),
    ("shine", "shines", "in the sun"),
    ("rattle", "rattles", "in the wind"),
    ("weigh", "weighs", "a lot"),
    ("smell", "smells", "strange"),
    ("fit", "fits", "in the car"),
    ("seem", "seems", "fragile"),
    ("match", "matches", "the curtains"),
    ("break", "breaks", "easily"),
    ("work", "works", "again"),
    ("squeak", "squeaks", ""),
    ("leak", "leaks", ""),
]
THING_DO_PREDICATES = [
    "work",
    "fit in the car",
    "open",
    "close properly",
    "cost much",
    "belong here",
    "look new",
    "smell nice",
    "match the curtains",
    "break easily",
]

ADJ_HUMAN = _words(
    "happy tired angry nervous busy late ready hungry sick quiet famous rich proud careful honest lonely "
    "brave polite curious upset asleep awake confused excited worried sleepy friendly generous patient "
    "jealous clever shy calm cheerful grumpy"
)
ADJ_ANIMAL = _words("hungry tired quiet asleep awake sick calm sleepy noisy friendly shy restless")
ADJ_THING = _words(
    "broken old expensive heavy dirty clean new rusty empty small large missing locked useful beautiful "
    "fragile cheap dusty wet ugly"
)
DEGREE = _words("very quite rather always never still not")
PRENOMINAL_ANIMATE = _words("old young tall famous local quiet nervous tired friendly busy elderly angry")
PRENOMINAL_THING = _words("old new small large heavy broken expensive empty dusty ugly")
PASSIVE_HUMAN = _words(
    "arrested praised invited fired promoted hired interviewed warned elected rescued injured delayed thanked"
)
PASSIVE_THING = _words("repaired sold stolen painted cleaned moved damaged found replaced locked opened delivered")
THING_PERFECT = ["disappeared", "fallen over", "cracked"] + [f"been {p}" for p in PASSIVE_THING]
ADVERBS = _words("often always rarely usually never sometimes still seldom")
TAILS = [
    "in the garden",
    "at the station",
    "in the kitchen",
    "at the market",
    "by the river",
    "in the park",
    "every morning",
    "at night",
    "on weekends",
    "after lunch",
    "in the evening",
    "every day",
    "in the hallway",
    "all day",
    "quietly",
    "loudly",
    "again",
]

PREPS_ANIMATE = ["near", "beside", "behind", "next to", "in front of", "across from", "with"]
PREPS_THING = ["near", "beside", "behind", "next to", "in front of", "on", "under", "above", "inside"]
# Relational heads that read well with "of" (the owner of the cars) or "to" (the key to the cabinets).
OF_HEADS = {"owner": "thing", "friend": "human", "cousin": "human", "captain": "human", "boss": "human"}
THING_OF_HEADS = {"key": "to", "door": "to", "picture": "of", "photo": "of", "painting": "of", "map": "of"}

SG_DETS = ["the"] * 7 + ["a"] * 2 + ["this", "that", "my", "our", "his", "her", "their", "your"]
PL_DETS = ["the"] * 7 + ["some", "these", "those", "two", "three", "several", "many", "my", "our", "their"]
# "the" and possessives carry no number; they dominate inside PPs, relative clauses and objects.
NEUTRAL_DETS = ["the"] * 6 + ["my", "our", "his", "her", "their", "your"]
PRONOUNS_SG = [("he", "human"), ("she", "human"), ("it", "thing"), ("it", "animal")]
PRONOUNS_PL = [("they", "human"), ("they", "thing"), ("they", "animal"), ("we", "human")]


# --------------------------------------------------------------------------------------------------
# Grammar
# --------------------------------------------------------------------------------------------------


class Gen:
    """Random choices through numpy's ``Generator.integers`` only, whose stream numpy keeps stable."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def pick(self, items: Sequence[T]) -> T:
        return items[int(self.rng.integers(len(items)))]

    def chance(self, p: float) -> bool:
        return int(self.rng.integers(1_000_000)) < round(p * 1_000_000)

    def weighted(self, weights: Sequence[int]) -> int:
        """An index drawn with probability proportional to the integer ``weights``."""
        r = int(self.rng.integers(sum(weights)))
        for i, w in enumerate(weights):
            r -= w
            if r < 0:
                return i
        raise AssertionError("unreachable")

    def zipf(self, items: Sequence[T], exponent: float) -> T:
        """An item drawn with weight 1 / rank**exponent (the first item is the most frequent)."""
        return items[self.weighted(zipf_weights(len(items), exponent))]

    def permutation(self, n: int) -> list[int]:
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = int(self.rng.integers(i + 1))
            order[i], order[j] = order[j], order[i]
        return order


def zipf_weights(n: int, exponent: float) -> list[int]:
    return [round(1_000_000 / (rank + 1) ** exponent) for rank in range(n)]


def noun_phrase(g: Gen, noun: Noun, plural: bool, dets: Sequence[str] | None = None, adj_p: float = 0.0) -> str:
    """A determiner, an optional adjective and the noun in the requested number."""
    det = g.pick(dets if dets is not None else (PL_DETS if plural else SG_DETS))
    words = []
    if g.chance(adj_p):
        words.append(g.pick(PRENOMINAL_THING if noun.kind == "thing" else PRENOMINAL_ANIMATE))
    words.append(noun.form(plural))
    if det == "a" and words[0][0] in "aeiou":
        det = "an"
    return " ".join([det, *words])


def other(g: Gen, pool: Sequence[Noun], *avoid: Noun) -> Noun:
    """A noun from ``pool`` that is not already in the sentence."""
    while True:
        noun = g.pick(pool)
        if noun not in avoid:
            return noun


def head_noun(g: Gen) -> Noun:
    return g.zipf(HEAD_RANKING, HEAD_ZIPF)


def tail(g: Gen) -> str:
    """An optional place or time phrase after an intransitive verb."""
    return g.pick(TAILS) if g.chance(TAIL_P) else ""


def animate_object(g: Gen) -> str:
    return noun_phrase(g, g.pick(ANIMATES), g.chance(0.5), NEUTRAL_DETS)


@dataclass(frozen=True)
class Subject:
    text: str
    plural: bool
    kind: str  # what the predicate must fit: "human" | "animal" | "thing"


@dataclass(frozen=True)
class Predicate:
    """``sg``/``pl``: the agreeing word for a singular/plural subject; ``pre``/``tail``: around it."""

    sg: str
    pl: str
    tail: str
    pre: str = ""


def predicate(g: Gen, kind: str) -> Predicate:
    """A predicate, fitting a subject of ``kind``, whose first verb agrees with the subject."""
    choices = [k for k in PREDICATE_WEIGHTS if kind != "thing" or k != "be_ing"]
    which = choices[g.weighted([PREDICATE_WEIGHTS[k] for k in choices])]
    human = kind == "human"
    if which == "be_adj":
        adj = g.pick({"human": ADJ_HUMAN, "animal": ADJ_ANIMAL, "thing": ADJ_THING}[kind])
        return Predicate("is", "are", f"{g.pick(DEGREE)} {adj}" if g.chance(ADVERB_P) else adj)
    if which == "be_ing":
        verb = g.pick(INTRANS_HUMAN if human else INTRANS_ANIMAL)
        return Predicate("is", "are", f"{verb.ing} {tail(g)}")
    if which == "was":
        if kind == "thing":
            return Predicate("was", "were", g.pick(ADJ_THING) if g.chance(0.4) else g.pick(PASSIVE_THING))
        if human:
            return Predicate("was", "were", g.pick(ADJ_HUMAN) if g.chance(0.5) else g.pick(PASSIVE_HUMAN))
        return Predicate("was", "were", g.pick(ADJ_ANIMAL))
    if which == "have":
        if kind == "thing":
            return Predicate("has", "have", g.pick(THING_PERFECT))
        if human and g.chance(0.5):
            return Predicate("has", "have", g.pick(PERFECT_HUMAN).pp)
        verb = g.pick(TRANS_HUMAN if human else TRANS_ANIMAL)
        return Predicate("has", "have", f"{verb.pp} {animate_object(g)}")
    if which == "do":
        sg, pl = g.pick([("doesn't", "don't"), ("does not", "do not")])
        if kind == "thing":
            return Predicate(sg, pl, g.pick(THING_DO_PREDICATES))
        if g.chance(0.5):
            verb = g.pick(INTRANS_HUMAN if human else INTRANS_ANIMAL)
            return Predicate(sg, pl, f"{verb.base} {tail(g)}")
        verb = g.pick(TRANS_HUMAN if human else TRANS_ANIMAL)
        return Predicate(sg, pl, f"{verb.base} {animate_object(g)}")
    # a lexical verb in the present tense: -s vs bare
    pre = g.pick(ADVERBS) if g.chance(ADVERB_P) else ""
    if kind == "thing":
        base, s3, comp = g.zipf(THING_VERB_PREDICATES, VERB_ZIPF)
        return Predicate(s3, base, comp, pre)
    r = int(g.rng.integers(10))
    if r < 2:
        base, s3 = g.zipf(LINKING, VERB_ZIPF)
        return Predicate(s3, base, g.pick(ADJ_HUMAN if human else ADJ_ANIMAL))
    if r < 6:
        verb = g.zipf(INTRANS_HUMAN if human else INTRANS_ANIMAL, VERB_ZIPF)
        return Predicate(verb.s3, verb.base, tail(g), pre)
    verb = g.zipf(TRANS_HUMAN if human else TRANS_ANIMAL, VERB_ZIPF)
    return Predicate(verb.s3, verb.base, animate_object(g), pre)


def prep_phrase(g: Gen, head: Noun, plural: bool, avoid: Sequence[Noun] = ()) -> tuple[str, Noun]:
    """A PP after ``head`` whose noun (the attractor) has the requested number; returns it and its noun."""
    if head.sg in THING_OF_HEADS and head.kind == "thing" and g.chance(0.5):
        prep = THING_OF_HEADS[head.sg]
        noun = other(g, LOCKABLE if prep == "to" else ALL_NOUNS, head, *avoid)
        return f"{prep} {noun_phrase(g, noun, plural, NEUTRAL_DETS)}", noun
    if head.sg in OF_HEADS and head.kind == "human" and g.chance(0.5):
        noun = other(g, THINGS if OF_HEADS[head.sg] == "thing" else HUMANS, head, *avoid)
        return f"of {noun_phrase(g, noun, plural, NEUTRAL_DETS)}", noun
    prep = g.pick(PREPS_THING if head.kind == "thing" else PREPS_ANIMATE)
    pool = {"with": ANIMATES, "on": SURFACES, "under": SURFACES, "above": SURFACES, "inside": CONTAINERS}
    noun = other(g, pool.get(prep, ALL_NOUNS), head, *avoid)
    dets = NEUTRAL_DETS if g.chance(0.7) else (PL_DETS if plural else SG_DETS)
    return f"{prep} {noun_phrase(g, noun, plural, dets, adj_p=0.15)}", noun


# Subject builders: given the number of the head and of the attractor(s), return the subject phrase.
def subj_pronoun(g: Gen, head_pl: bool, _attr: tuple[bool, ...]) -> Subject:
    word, kind = g.pick(PRONOUNS_PL if head_pl else PRONOUNS_SG)
    return Subject(word, head_pl, kind)


def subj_simple(g: Gen, head_pl: bool, _attr: tuple[bool, ...]) -> Subject:
    head = head_noun(g)
    return Subject(noun_phrase(g, head, head_pl, adj_p=0.25), head_pl, head.kind)


def subj_pp(g: Gen, head_pl: bool, attr: tuple[bool, ...]) -> Subject:
    head = head_noun(g)
    pp, _ = prep_phrase(g, head, attr[0])
    return Subject(f"{noun_phrase(g, head, head_pl, adj_p=0.2)} {pp}", head_pl, head.kind)


def subj_pp2(g: Gen, head_pl: bool, attr: tuple[bool, ...]) -> Subject:
    head = head_noun(g)
    pp1, noun1 = prep_phrase(g, head, attr[0])
    pp2, _ = prep_phrase(g, noun1, attr[1], avoid=[head])
    return Subject(f"{noun_phrase(g, head, head_pl)} {pp1} {pp2}", head_pl, head.kind)


def subj_obj_rel(g: Gen, head_pl: bool, attr: tuple[bool, ...]) -> Subject:
    """The head is the object of the relative clause, whose own subject is the attractor."""
    head = head_noun(g)
    inner = noun_phrase(g, other(g, HUMANS, head), attr[0], NEUTRAL_DETS)
    if head.kind == "thing":
        verb, rel = g.pick(TRANS_THING_OBJ), g.pick(["that", "that", "which", ""])
    elif head.kind == "human":
        verb, rel = g.pick(TRANS_HUMAN), g.pick(["that", "that", "who", "whom", ""])
    else:
        verb, rel = g.pick(TRANS_ANIMAL), g.pick(["that", "that", ""])
    # the inner verb agrees with the attractor; in the past tense it shows no number at all
    inner_verb = verb.past if g.chance(0.25) else verb.base if attr[0] else verb.s3
    words = [noun_phrase(g, head, head_pl), rel, inner, inner_verb]
    return Subject(" ".join(w for w in words if w), head_pl, head.kind)


def subj_subj_rel(g: Gen, head_pl: bool, attr: tuple[bool, ...]) -> Subject:
    """The head is the subject of the relative clause, whose object is the attractor."""
    head = head_noun(g)
    if head.kind == "thing":
        verb, obj, rel = g.pick(TRANS_THING_SUBJ), other(g, THINGS, head), g.pick(["that", "which"])
    elif head.kind == "human":
        verb, obj, rel = g.pick(TRANS_HUMAN), other(g, ANIMATES, head), g.pick(["who", "that"])
    else:
        verb, obj, rel = g.pick(TRANS_ANIMAL), other(g, ANIMATES, head), g.pick(["that", "which"])
    # the inner verb agrees with the head; in the past tense it shows no number at all
    inner_verb = verb.past if g.chance(0.3) else verb.base if head_pl else verb.s3
    obj_np = noun_phrase(g, obj, attr[0], NEUTRAL_DETS if g.chance(0.7) else None)
    return Subject(f"{noun_phrase(g, head, head_pl)} {rel} {inner_verb} {obj_np}", head_pl, head.kind)


@dataclass(frozen=True)
class Construction:
    build: Callable[[Gen, bool, tuple[bool, ...]], Subject]
    n_attractors: int

    def cells(self) -> list[tuple[bool, tuple[bool, ...]]]:
        """Every (head plural?, attractors plural?) combination; generation cycles through them."""
        combos = [tuple(bool(k >> b & 1) for b in range(self.n_attractors)) for k in range(2**self.n_attractors)]
        return [(head, attr) for head in (False, True) for attr in combos]


GRAMMAR: dict[str, Construction] = {
    "pronoun": Construction(subj_pronoun, 0),
    "simple": Construction(subj_simple, 0),
    "pp": Construction(subj_pp, 1),
    "pp2": Construction(subj_pp2, 2),
    "obj_rel": Construction(subj_obj_rel, 1),
    "subj_rel": Construction(subj_subj_rel, 1),
}


def _sentence(words: Sequence[str]) -> str:
    text = " ".join(" ".join(words).split())
    return text[0].upper() + text[1:] + "."


def make_pair(g: Gen, name: str, head_pl: bool, attr: tuple[bool, ...]) -> tuple[str, str]:
    """One minimal pair (grammatical, ungrammatical) of construction ``name``."""
    subj = GRAMMAR[name].build(g, head_pl, attr)
    pred = predicate(g, subj.kind)
    good, bad = (pred.pl, pred.sg) if subj.plural else (pred.sg, pred.pl)
    return _sentence([subj.text, pred.pre, good, pred.tail]), _sentence([subj.text, pred.pre, bad, pred.tail])


def apportion(total: int, shares: dict[str, float]) -> dict[str, int]:
    """Largest-remainder rounding of ``total * share``, so that the counts sum to ``total``."""
    norm = sum(shares.values())
    raw = {k: total * v / norm for k, v in shares.items()}
    counts = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (counts[k] - raw[k], k))[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def generate(seed: int = SEED, n_train: int = N_TRAIN, n_validation: int = N_VALIDATION) -> dict[str, pd.DataFrame]:
    """Both splits, with extra columns ``construction`` and ``pair`` for analysis (not written to disk)."""
    if n_train % 2 or n_validation % 2:
        raise ValueError("Split sizes must be even: every item is a minimal pair.")
    g = Gen(seed)
    seen: set[str] = set()
    splits: dict[str, pd.DataFrame] = {}
    pair = 0
    for split, n in (("train", n_train), ("validation", n_validation)):
        rows: list[tuple[str, int, str, int]] = []
        for name, count in apportion(n // 2, CONSTRUCTIONS).items():
            cells = GRAMMAR[name].cells()
            for i in range(count):
                head_pl, attr = cells[i % len(cells)]
                for _attempt in range(1000):
                    good, bad = make_pair(g, name, head_pl, attr)
                    if good not in seen and bad not in seen:
                        break
                else:
                    raise RuntimeError(f"No new '{name}' pair after 1000 tries; enlarge the vocabulary.")
                seen.update((good, bad))
                rows += [(good, 1, name, pair), (bad, 0, name, pair)]
                pair += 1
        frame = pd.DataFrame([rows[i] for i in g.permutation(len(rows))])
        frame.columns = ["sentence", "label", "construction", "pair"]
        frame["label"] = frame["label"].astype("int64")
        frame["idx"] = np.arange(len(frame), dtype=np.int32)
        splits[split] = frame
    return splits


SCHEMA = pa.schema([("sentence", pa.string()), ("label", pa.int64()), ("idx", pa.int32())])


def write(splits: dict[str, pd.DataFrame], out_dir: Path = OUT_DIR) -> None:
    """Write the GLUE columns only (no pandas metadata), zstd-compressed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, frame in splits.items():
        table = pa.Table.from_arrays(
            [
                pa.array(frame["sentence"].tolist(), pa.string()),
                pa.array(frame["label"].to_numpy(), pa.int64()),
                pa.array(frame["idx"].to_numpy(), pa.int32()),
            ],
            schema=SCHEMA,
        )
        pq.write_table(table, out_dir / f"{split}.parquet", compression="zstd")


def digest(splits: dict[str, pd.DataFrame]) -> str:
    """SHA-256 over split, sentence and label of every row, to check a rebuild against the README."""
    h = hashlib.sha256()
    for split in ("train", "validation"):
        for sentence, label in zip(splits[split]["sentence"], splits[split]["label"], strict=True):
            h.update(f"{split}\t{sentence}\t{label}\n".encode())
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild freezestats' demo agreement data set.")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    splits = generate(args.seed)
    write(splits, args.out)
    for split, frame in splits.items():
        print(f"{split}: {len(frame)} sentences, {frame['label'].mean():.1%} grammatical -> {args.out}/{split}.parquet")
    print(f"content sha256: {digest(splits)}")


if __name__ == "__main__":
    main()
