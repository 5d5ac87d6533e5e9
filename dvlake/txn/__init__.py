"""dvlake.txn"""
