"""The deletion-vector codec: roaring bitmap arrays, Z85, descriptors and DV files. No Spark here."""
