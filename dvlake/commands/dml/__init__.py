"""Row-level DML: DELETE, UPDATE and MERGE on one template (``template.py``), and the pieces they share:
DV marking, the observed (file, row) pairs, change data files, store assignment, argument checks."""
