"""From a fitted model to an answer: marginal means and contrasts (``emm``), F and likelihood-ratio tests
(``ftest``), multiplicity (``multitest``), the non-inferiority sequence and its sentences (``noninferiority``,
``sequence``, ``answer``), contrasts paired by seed (``paired``) and power by simulation (``power``).
"""
