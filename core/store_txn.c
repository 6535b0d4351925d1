/* store_txn — to be written */
