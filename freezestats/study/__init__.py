"""The study in its database (stage 3): the grid's cells, one Optuna trial per cell, the storage, ``--extend``.

``cells`` expands a spec into cells; ``trials`` creates or loads the Optuna study and turns cells into trials and
back; ``queue`` enqueues and re-enqueues cells (what makes a run resumable); ``storage`` opens SQLite, PostgreSQL
or journal storage with heartbeats; ``extend`` says whether a changed spec only adds grid values;
``lr_search`` picks the learning rate from the search trials.
"""
