/* btree — to be written */
